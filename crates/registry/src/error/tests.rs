use super::*;

#[test]
fn wire_and_user_text_is_escaped_and_bounded() {
    let hostile = format!("application/x\u{1b}[31m\nred{}", "a".repeat(10_000));
    let error = Error::UnsupportedMediaType {
        reference: "r.io/app:1".into(),
        registry: "r.io".into(),
        media_type: hostile.clone(),
    };
    let message = error.to_string();
    assert!(message.len() < 300, "{message}");
    assert!(!message.chars().any(char::is_control), "{message:?}");
    assert!(message.contains("\\u{1b}[31m\\nred"), "{message}");
    let error = Error::InvalidContent {
        reference: "r.io/app:1".into(),
        registry: "r.io".into(),
        what: "manifest",
        reason: hostile.clone(),
    };
    assert!(!error.to_string().chars().any(char::is_control));
    let error = Error::invalid_reference(&hostile, "invalid");
    let message = error.to_string();
    assert!(message.len() < 300 && !message.chars().any(char::is_control));
    // Ordinary text is shown as it is.
    assert_eq!(escaped("linux/arm64"), "linux/arm64");
    assert_eq!(quoted("nginx"), "\"nginx\"");
}

#[test]
fn bounded_cuts_on_a_character_boundary() {
    assert_eq!(bounded("amd64", 8), "amd64");
    assert_eq!(bounded("abcdefgh", 4), "abcd…");
    // 'é' is two bytes: a cut inside it backs off to before it.
    assert_eq!(bounded("aé", 2), "a…");
    assert_eq!(bounded("", 0), "");
}

#[test]
fn messages_name_no_command_line_flag() {
    let errors = [
        Error::Blocked {
            host: "meta.test".into(),
            address: IpAddr::from([169, 254, 169, 254]),
        },
        Error::Timeout {
            reference: "r".into(),
            registry: "h".into(),
            timeout_ms: 1,
        },
        Error::InsecureRedirect {
            reference: "r".into(),
            registry: "h".into(),
            target: "t".into(),
        },
    ];
    for error in errors {
        assert!(!error.to_string().contains("--"), "{error}");
    }
}
