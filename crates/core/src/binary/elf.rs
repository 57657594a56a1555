//! The ELF identification of a program's first bytes, and the machine each platform runs
//! (docs/architecture.md "Verification"): bytes 0–3 `7f 45 4c 46`, byte 4 the class (1 = 32-bit,
//! 2 = 64-bit), byte 5 the data encoding (1 = little-endian, 2 = big-endian), `e_machine` at
//! offset 18 (two bytes, in that byte order).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Platform;

/// Bytes of a file needed to read its ELF identification and `e_machine`.
pub const ELF_HEADER_LEN: usize = 20;

const MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];

/// 32- or 64-bit (`EI_CLASS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Class {
    Elf32,
    Elf64,
}

/// Byte order (`EI_DATA`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Endian {
    Little,
    Big,
}

/// What an ELF file's header says it runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Machine {
    /// `e_machine`.
    pub code: u16,
    pub class: Class,
    pub endian: Endian,
}

/// Declares each `e_machine` value of the tables below as its `EM_` constant, and `EM_NAMES`
/// pairing each value with its constant's name (each name written once).
macro_rules! machines {
    ($($name:ident = $code:literal,)*) => {
        $(const $name: u16 = $code;)*
        /// `(e_machine, the name of its EM_ constant)`.
        const EM_NAMES: &[(u16, &str)] = &[$(($name, stringify!($name))),*];
    };
}

machines! {
    EM_386 = 3,
    EM_MIPS = 8,
    EM_PPC = 20,
    EM_PPC64 = 21,
    EM_S390 = 22,
    EM_ARM = 40,
    EM_SPARCV9 = 43,
    EM_X86_64 = 62,
    EM_AARCH64 = 183,
    EM_RISCV = 243,
    EM_LOONGARCH = 258,
}

impl Machine {
    /// The identification of `head` (a file's first bytes), `None` when it is not an ELF file
    /// or its class, byte order or length are not ELF's.
    pub fn parse(head: &[u8]) -> Option<Self> {
        let ident = head.get(..ELF_HEADER_LEN)?;
        if ident[..4] != MAGIC {
            return None;
        }
        let class = match ident[4] {
            1 => Class::Elf32,
            2 => Class::Elf64,
            _ => return None,
        };
        let (endian, code) = match ident[5] {
            1 => (Endian::Little, u16::from_le_bytes([ident[18], ident[19]])),
            2 => (Endian::Big, u16::from_be_bytes([ident[18], ident[19]])),
            _ => return None,
        };
        Some(Self {
            code,
            class,
            endian,
        })
    }

    /// The machine a platform's programs must be, `None` for an architecture without an
    /// entry in the table (docs/architecture.md "Verification").
    pub fn expected(platform: &Platform) -> Option<Self> {
        use Class::{Elf32, Elf64};
        use Endian::{Big, Little};
        let (code, class, endian) = match platform.architecture.as_str() {
            "amd64" => (EM_X86_64, Elf64, Little),
            "arm64" => (EM_AARCH64, Elf64, Little),
            "arm" => (EM_ARM, Elf32, Little),
            "386" => (EM_386, Elf32, Little),
            "ppc64le" => (EM_PPC64, Elf64, Little),
            "ppc64" => (EM_PPC64, Elf64, Big),
            "s390x" => (EM_S390, Elf64, Big),
            "riscv64" => (EM_RISCV, Elf64, Little),
            "loong64" => (EM_LOONGARCH, Elf64, Little),
            "mips64le" => (EM_MIPS, Elf64, Little),
            "mips64" => (EM_MIPS, Elf64, Big),
            "mipsle" => (EM_MIPS, Elf32, Little),
            "mips" => (EM_MIPS, Elf32, Big),
            _ => return None,
        };
        Some(Self {
            code,
            class,
            endian,
        })
    }

    /// The machine in `file(1)`'s words: `x86-64`, `aarch64`, `arm`, `i386`, `ppc64le`,
    /// `s390x`, `riscv64`, `loongarch64`; `machine N` for one outside the table. A class or
    /// byte order unusual for the machine is said (`aarch64 (32-bit)`).
    pub fn name(&self) -> String {
        use Class::{Elf32, Elf64};
        use Endian::{Big, Little};
        let usual = |class: Class, endian: Endian, word: &str| {
            let mut text = word.to_owned();
            if self.class != class {
                text.push_str(match self.class {
                    Elf32 => " (32-bit)",
                    Elf64 => " (64-bit)",
                });
            }
            if self.endian != endian {
                text.push_str(match self.endian {
                    Little => " (little-endian)",
                    Big => " (big-endian)",
                });
            }
            text
        };
        match self.code {
            EM_X86_64 => usual(Elf64, Little, "x86-64"),
            EM_AARCH64 => usual(Elf64, Little, "aarch64"),
            EM_ARM => usual(Elf32, Little, "arm"),
            EM_386 => usual(Elf32, Little, "i386"),
            EM_PPC64 if self.endian == Little => usual(Elf64, Little, "ppc64le"),
            EM_PPC64 => usual(Elf64, Big, "ppc64"),
            EM_PPC => usual(Elf32, Big, "ppc"),
            EM_S390 if self.class == Elf32 => "s390".to_owned(),
            EM_S390 => usual(Elf64, Big, "s390x"),
            EM_RISCV if self.class == Elf32 => "riscv32".to_owned(),
            EM_RISCV => usual(Elf64, Little, "riscv64"),
            EM_LOONGARCH => usual(Elf64, Little, "loongarch64"),
            EM_MIPS => match (self.class, self.endian) {
                (Elf64, Little) => "mips64el".to_owned(),
                (Elf64, Big) => "mips64".to_owned(),
                (Elf32, Little) => "mipsel".to_owned(),
                (Elf32, Big) => "mips".to_owned(),
            },
            EM_SPARCV9 => "sparc64".to_owned(),
            other => format!("machine {other}"),
        }
    }

    /// The `EM_` constant of `e_machine` (`EM_X86_64`), or `e_machine N`.
    pub fn constant(&self) -> String {
        EM_NAMES
            .iter()
            .find(|(code, _)| *code == self.code)
            .map_or_else(
                || format!("e_machine {}", self.code),
                |(_, name)| (*name).to_owned(),
            )
    }

    /// Packs into 20 bits (the verification's index keeps it in a word).
    pub(crate) fn pack(self) -> u32 {
        let class = match self.class {
            Class::Elf32 => 0,
            Class::Elf64 => 1,
        };
        let endian = match self.endian {
            Endian::Little => 0,
            Endian::Big => 1,
        };
        u32::from(self.code) | (class << 16) | (endian << 17)
    }

    pub(crate) fn unpack(word: u32) -> Self {
        Self {
            code: (word & 0xffff) as u16,
            class: if word & (1 << 16) == 0 {
                Class::Elf32
            } else {
                Class::Elf64
            },
            endian: if word & (1 << 17) == 0 {
                Endian::Little
            } else {
                Endian::Big
            },
        }
    }
}

/// The first 64 bytes of an ELF file of `machine` (what tests and benchmarks write into
/// layers; nothing runs it).
pub fn synthetic_header(machine: Machine) -> Vec<u8> {
    let mut h = vec![0u8; 64];
    h[..4].copy_from_slice(&MAGIC);
    h[4] = match machine.class {
        Class::Elf32 => 1,
        Class::Elf64 => 2,
    };
    let code = match machine.endian {
        Endian::Little => {
            h[5] = 1;
            machine.code.to_le_bytes()
        }
        Endian::Big => {
            h[5] = 2;
            machine.code.to_be_bytes()
        }
    };
    h[6] = 1;
    h[18..20].copy_from_slice(&code);
    h
}

impl fmt::Display for Machine {
    /// `x86-64 ELF (EM_X86_64)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ELF ({})", self.name(), self.constant())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// An ELF header of `class` (1, 2, or invalid), `data` and `machine`.
    fn header(class: u8, data: u8, machine: u16) -> Vec<u8> {
        let endian = if data == 2 {
            Endian::Big
        } else {
            Endian::Little
        };
        let mut h = synthetic_header(Machine {
            code: machine,
            class: Class::Elf64,
            endian,
        });
        h[4] = class;
        h[5] = data;
        h
    }

    #[test]
    fn each_platform_of_the_table_expects_its_machine() {
        let cases = [
            ("amd64", 2, 1, 62, "x86-64", "EM_X86_64"),
            ("arm64", 2, 1, 183, "aarch64", "EM_AARCH64"),
            ("arm", 1, 1, 40, "arm", "EM_ARM"),
            ("386", 1, 1, 3, "i386", "EM_386"),
            ("ppc64le", 2, 1, 21, "ppc64le", "EM_PPC64"),
            ("s390x", 2, 2, 22, "s390x", "EM_S390"),
            ("riscv64", 2, 1, 243, "riscv64", "EM_RISCV"),
            ("loong64", 2, 1, 258, "loongarch64", "EM_LOONGARCH"),
        ];
        for (arch, class, data, code, name, constant) in cases {
            let machine = Machine::parse(&header(class, data, code)).unwrap();
            let platform = Platform::new("linux", arch, None);
            assert_eq!(Machine::expected(&platform), Some(machine), "{arch}");
            assert_eq!(machine.name(), name);
            assert_eq!(machine.constant(), constant);
        }
        assert_eq!(
            Machine::expected(&Platform::new("linux", "wasm", None)),
            None
        );
    }

    #[test]
    fn what_is_not_elf_is_none() {
        assert_eq!(Machine::parse(b""), None);
        assert_eq!(Machine::parse(b"#!/bin/sh\necho hello world\n"), None);
        assert_eq!(Machine::parse(b"PK\x03\x04 a jar"), None);
        assert_eq!(Machine::parse(&header(2, 1, 62)[..19]), None);
        assert_eq!(Machine::parse(&header(3, 1, 62)), None);
        assert_eq!(Machine::parse(&header(2, 0, 62)), None);
    }

    #[test]
    fn unusual_class_and_order_are_named() {
        let x32 = Machine::parse(&header(1, 1, 62)).unwrap();
        assert_eq!(x32.name(), "x86-64 (32-bit)");
        assert_eq!(x32.to_string(), "x86-64 (32-bit) ELF (EM_X86_64)");
        let ppc64 = Machine::parse(&header(2, 2, 21)).unwrap();
        assert_eq!(ppc64.name(), "ppc64");
        let odd = Machine::parse(&header(2, 1, 4242)).unwrap();
        assert_eq!(odd.name(), "machine 4242");
        assert_eq!(odd.constant(), "e_machine 4242");
        for m in [x32, ppc64, odd] {
            assert_eq!(Machine::unpack(m.pack()), m);
        }
    }
}
