//! One platform's verification as a state machine: built from the platform and its config, fed
//! the layers' tar entries from the top layer down, it answers with a [`Report`] as soon as the
//! layers read decide — usually inside the first layer that holds the program.
//!
//! A bare name is looked for in each `PATH` directory: the first directory whose file is
//! decided wins once every directory before it is known to hold none; when the layer that
//! holds one ends while an earlier directory is still undecided (it could only be in a lower
//! layer), the one found wins (reading every lower layer to rule the other out would cost the
//! whole image for a name two directories rarely share).

use super::elf::Machine;
use super::search::{Exhausted, Node, Probe, Search, Want};
use super::tar::Entry;
use super::{article, path, Reason, Report, Run, Shebang, Verdict};
use crate::Platform;

/// Layers of one image manifest read at most.
pub const MAX_LAYERS: usize = 128;

#[derive(Debug)]
struct Candidate {
    want: Want,
    probe: Probe,
}

/// What is being looked for: the program, or the interpreter of the script it turned out to be.
#[derive(Debug)]
struct Lookup {
    /// The script whose interpreter this is.
    script: Option<String>,
    /// The name or path looked for (for messages).
    looked_for: String,
    candidates: Vec<Candidate>,
}

impl Lookup {
    fn new(script: Option<String>, looked_for: &str, paths: Vec<String>) -> Self {
        let candidates = paths
            .into_iter()
            .map(|path| Candidate {
                probe: Probe::Pending {
                    waiting: path.clone(),
                },
                want: Want::new(path),
            })
            .collect();
        Self {
            script,
            looked_for: looked_for.to_owned(),
            candidates,
        }
    }
}

/// One platform manifest's verification. Feed it with [`Verification::begin_layer`],
/// [`Verification::entry`] and [`Verification::end_layer`], top layer first, until one of them
/// answers.
#[derive(Debug)]
pub struct Verification {
    expected: Machine,
    run: Run,
    search: Search,
    lookup: Lookup,
    outcome: Option<Report>,
}

impl Verification {
    /// A verification of `platform` whose config says `run`, over `layers` layers. A report
    /// at once when nothing needs reading (a Windows image, an architecture outside the table,
    /// no program, too many layers, an image without layers).
    pub fn new(platform: &Platform, run: &Run, layers: usize) -> Result<Self, Report> {
        if platform.os == "windows" {
            return Err(Report::unverifiable(
                Reason::Windows,
                None,
                "a Windows image: its programs are PE files, not ELF",
            ));
        }
        let Some(expected) = Machine::expected(platform) else {
            return Err(Report::unverifiable(
                Reason::UnknownPlatform,
                None,
                format!(
                    "no machine is known for architecture {:?}",
                    platform.architecture
                ),
            ));
        };
        let Some(word) = run.first_word.as_deref() else {
            return Err(Report::unverifiable(
                Reason::NotFound,
                None,
                "the config runs no program (Entrypoint and Cmd are empty)",
            ));
        };
        if layers > MAX_LAYERS {
            return Err(Report::unverifiable(
                Reason::Budget,
                Some(word),
                format!("{layers} layers, more than {MAX_LAYERS}"),
            ));
        }
        let paths = run.candidates(word).map_err(|_| {
            Report::unverifiable(Reason::Budget, None, "the program's path is too long")
        })?;
        let mut verification = Self {
            expected,
            run: run.clone(),
            search: Search::new(layers),
            lookup: Lookup::new(None, word, paths),
            outcome: None,
        };
        verification.resolve_all();
        match verification.advance(false) {
            Some(report) => Err(report.clone()),
            None => Ok(verification),
        }
    }

    /// The report, once there is one.
    pub fn outcome(&self) -> Option<&Report> {
        self.outcome.as_ref()
    }

    /// Layers begun so far.
    pub fn layers_read(&self) -> usize {
        self.search.layers_read()
    }

    /// Bytes held to remember the layers read (the bound docs/architecture.md states).
    pub fn buffered(&self) -> usize {
        self.search.bytes()
    }

    /// The next layer (from the top) begins.
    pub fn begin_layer(&mut self) {
        self.search.begin_layer();
    }

    /// One entry of the current layer; a report when it decides.
    pub fn entry(&mut self, entry: &Entry<'_>) -> Option<&Report> {
        if self.outcome.is_some() {
            return self.outcome.as_ref();
        }
        if let Err(exhausted) = self.search.record(entry) {
            return self.conclude(exhausted_report(exhausted, &self.lookup.looked_for));
        }
        let mut concerned = false;
        for candidate in &mut self.lookup.candidates {
            if let Probe::Pending { waiting } = &candidate.probe {
                if Search::concerns(entry.path, waiting) {
                    candidate.probe = self.search.resolve(&candidate.want);
                    concerned = true;
                }
            }
        }
        if concerned {
            self.advance(false)
        } else {
            None
        }
    }

    /// The current layer was read to its end; a report when that decides.
    pub fn end_layer(&mut self) -> Option<&Report> {
        if self.outcome.is_some() {
            return self.outcome.as_ref();
        }
        self.search.end_layer();
        self.advance(true)
    }

    /// Ends the verification with `reason` (a bound reached, a layer that cannot be read),
    /// unless it has already ended.
    pub fn fail(&mut self, reason: Reason, evidence: impl Into<String>) -> &Report {
        let looked_for = &self.lookup.looked_for;
        self.outcome
            .get_or_insert_with(|| Report::unverifiable(reason, Some(looked_for), evidence))
    }

    fn resolve_all(&mut self) {
        for candidate in &mut self.lookup.candidates {
            if let Probe::Pending { .. } = candidate.probe {
                candidate.probe = self.search.resolve(&candidate.want);
            }
        }
    }

    fn conclude(&mut self, report: Report) -> Option<&Report> {
        self.outcome = Some(report);
        self.outcome.as_ref()
    }

    /// Decides what the candidates' probes allow; follows a script to its interpreter once;
    /// concludes on an ELF. Every pending candidate is resolved again at a layer's end and
    /// after a new lookup begins (an entry re-resolves only the ones it concerns).
    fn advance(&mut self, layer_end: bool) -> Option<&Report> {
        let mut fresh = layer_end;
        loop {
            if fresh {
                self.resolve_all();
            }
            fresh = true;
            let exhausted = self.lookup.candidates.iter().find_map(|c| match c.probe {
                Probe::Exhausted(e) => Some(e),
                _ => None,
            });
            if let Some(exhausted) = exhausted {
                let report = exhausted_report(exhausted, &self.lookup.looked_for);
                return self.conclude(report);
            }
            let candidates = &self.lookup.candidates;
            let open = candidates
                .iter()
                .position(|c| !matches!(c.probe, Probe::Missing));
            let chosen = match open {
                None => return self.conclude(self.not_found()),
                Some(i) if matches!(candidates[i].probe, Probe::Found { .. }) => i,
                Some(_) if layer_end => candidates
                    .iter()
                    .position(|c| matches!(c.probe, Probe::Found { .. }))?,
                Some(_) => return None,
            };
            let Probe::Found { path, node } = candidates[chosen].probe.clone() else {
                return None;
            };
            match node {
                Node::Elf(packed) => {
                    let report = self.compare(&path, Machine::unpack(packed));
                    return self.conclude(report);
                }
                Node::Script(line) if self.lookup.script.is_none() => {
                    let line = format!("#!{}", self.search.text(line));
                    if let Some(report) = self.follow(path, &line) {
                        return self.conclude(report);
                    }
                }
                Node::Script(_) => {
                    let report =
                        self.not_elf(&path, "itself a script (an interpreter is followed once)");
                    return self.conclude(report);
                }
                _ => {
                    let report = self.not_elf(&path, "not an ELF program");
                    return self.conclude(report);
                }
            }
        }
    }

    /// Looks for the interpreter of the script at `script` next; a report when it names none.
    fn follow(&mut self, script: String, line: &str) -> Option<Report> {
        let shebang = Shebang::parse(line.as_bytes());
        let Some((shebang, word)) = shebang
            .as_ref()
            .and_then(|s| s.program().map(|w| (s, w.to_owned())))
        else {
            return Some(Report::unverifiable(
                Reason::NotFound,
                Some(&script),
                format!("{script} starts with {line:?}, which names no program"),
            ));
        };
        // The kernel reads an interpreter as a path (relative ones from the working
        // directory); `env` looks a name up in PATH.
        let paths = if shebang.program() == Some(shebang.interpreter.as_str()) {
            path::normalize(&self.run.working_dir, &word).map(|p| vec![p])
        } else {
            self.run.candidates(&word)
        };
        let Ok(paths) = paths else {
            return Some(Report::unverifiable(
                Reason::Budget,
                Some(&script),
                "the interpreter's path is too long",
            ));
        };
        self.lookup = Lookup::new(Some(script), &word, paths);
        None
    }

    fn compare(&self, path: &str, machine: Machine) -> Report {
        let name = machine.to_string();
        let (program, evidence) = match &self.lookup.script {
            Some(script) => (
                script.clone(),
                format!("{script} runs {path}, {} {name}", article(&name)),
            ),
            None => (
                path.to_owned(),
                format!("{path} is {} {name}", article(&name)),
            ),
        };
        let verdict = if machine == self.expected {
            Verdict::Verified
        } else {
            Verdict::Mismatch
        };
        Report {
            verdict,
            reason: None,
            program: Some(program),
            machine: Some(machine),
            evidence: super::bounded(&evidence),
        }
    }

    fn not_elf(&self, path: &str, what: &str) -> Report {
        match &self.lookup.script {
            Some(script) => Report::unverifiable(
                Reason::NotElf,
                Some(script),
                format!("{script} runs {path}, {what}"),
            ),
            None => Report::unverifiable(Reason::NotElf, Some(path), format!("{path} is {what}")),
        }
    }

    fn not_found(&self) -> Report {
        let Lookup {
            script,
            looked_for,
            candidates,
        } = &self.lookup;
        let place = match candidates.as_slice() {
            [only] => format!("no file at {}", only.want.path),
            _ => format!("no {looked_for} in PATH"),
        };
        match script {
            Some(script) => Report::unverifiable(
                Reason::NotFound,
                Some(script),
                format!("{script} runs {looked_for}: {place}"),
            ),
            None => Report::unverifiable(Reason::NotFound, Some(looked_for), place),
        }
    }
}

fn exhausted_report(exhausted: Exhausted, looked_for: &str) -> Report {
    let evidence = match exhausted {
        Exhausted::Entries => format!(
            "more than {} tar entries before the program was found",
            super::MAX_ENTRIES
        ),
        Exhausted::Records => "more links and executables than a verification remembers".to_owned(),
        Exhausted::PathLength => "a path or link target longer than 4096 bytes".to_owned(),
    };
    Report::unverifiable(Reason::Budget, Some(looked_for), evidence)
}

#[cfg(test)]
#[path = "verification/tests.rs"]
mod tests;
