use super::*;

fn run(json: &str) -> Run {
    Run::from_config(json.as_bytes()).unwrap()
}

#[test]
fn the_program_is_the_first_word_of_entrypoint_else_cmd() {
    let cases = [
        (
            r#"{"config":{"Entrypoint":["/app","-v"],"Cmd":["x"]}}"#,
            Some("/app"),
        ),
        (r#"{"config":{"Cmd":["nginx","-g"]}}"#, Some("nginx")),
        (r#"{"config":{"Entrypoint":[],"Cmd":["sh"]}}"#, Some("sh")),
        (r#"{"config":{"Entrypoint":null,"Cmd":["sh"]}}"#, Some("sh")),
        (r#"{"config":{"Entrypoint":[""],"Cmd":["sh"]}}"#, None),
        (r#"{"config":{}}"#, None),
        (r#"{"architecture":"amd64"}"#, None),
    ];
    for (json, expected) in cases {
        assert_eq!(run(json).first_word.as_deref(), expected, "{json}");
    }
    assert!(Run::from_config(b"[1]").is_err());
}

#[test]
fn a_bare_name_goes_through_path_a_relative_one_through_the_working_dir() {
    let image = run(
        r#"{"config":{"WorkingDir":"/srv/app/","Env":["A=1","PATH=/opt/bin::bin:/opt/bin","PATH=/x:/opt/bin:rel"]}}"#,
    );
    assert_eq!(image.working_dir, "/srv/app");
    assert_eq!(
        image.candidates("python3").unwrap(),
        ["/x/python3", "/opt/bin/python3", "/srv/app/rel/python3"]
    );
    assert_eq!(image.candidates("./run.sh").unwrap(), ["/srv/app/run.sh"]);
    assert_eq!(image.candidates("../../../bin/x").unwrap(), ["/bin/x"]);
    assert_eq!(image.candidates("/usr/bin/env").unwrap(), ["/usr/bin/env"]);
    let default = run(r#"{"config":{}}"#);
    assert_eq!(default.working_dir, "/");
    assert_eq!(
        default.candidates("sh").unwrap(),
        [
            "/usr/local/sbin/sh",
            "/usr/local/bin/sh",
            "/usr/sbin/sh",
            "/usr/bin/sh",
            "/sbin/sh",
            "/bin/sh"
        ]
    );
    let long = format!("/{}", "a".repeat(MAX_PATH_LEN));
    assert!(default.candidates(&long).is_err());
}

#[test]
fn shebang_lines_as_the_kernel_reads_them() {
    type Parsed<'a> = Option<(&'a str, Option<&'a str>)>;
    let cases: [(&[u8], Parsed<'_>, Option<&str>); 9] = [
        (
            b"#!/bin/sh\nexec x",
            Some(("/bin/sh", None)),
            Some("/bin/sh"),
        ),
        (
            b"#! /bin/bash -e\n",
            Some(("/bin/bash", Some("-e"))),
            Some("/bin/bash"),
        ),
        (
            b"#!/usr/bin/env python3\n",
            Some(("/usr/bin/env", Some("python3"))),
            Some("python3"),
        ),
        (
            b"#!/usr/bin/env -S node --flag\n",
            Some(("/usr/bin/env", Some("-S node --flag"))),
            Some("node"),
        ),
        (
            b"#!/usr/bin/env A=1 ruby\r\n",
            Some(("/usr/bin/env", Some("A=1 ruby"))),
            Some("ruby"),
        ),
        (b"#!/usr/bin/env\n", Some(("/usr/bin/env", None)), None),
        (b"#!\n", None, None),
        (b"\x7fELF", None, None),
        (b"#!/bin/sh", Some(("/bin/sh", None)), Some("/bin/sh")),
    ];
    for (head, parsed, program) in cases {
        let shebang = Shebang::parse(head);
        assert_eq!(
            shebang
                .as_ref()
                .map(|s| (s.interpreter.as_str(), s.argument.as_deref())),
            parsed,
            "{head:?}"
        );
        assert_eq!(shebang.as_ref().and_then(Shebang::program), program);
    }
    // Only the first 256 bytes of the line count.
    let long = format!("#!/bin/{}\n", "x".repeat(400));
    assert_eq!(
        Shebang::parse(long.as_bytes()).unwrap().interpreter.len(),
        SHEBANG_LEN
    );
}
