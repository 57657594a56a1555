//! bcrypt htpasswd files, the only kind the distribution registry accepts.

/// Renders an htpasswd file (`user:$2y$...` per line) for the given users.
///
/// Uses the minimum bcrypt cost so tests stay fast; never use this for real passwords.
pub fn htpasswd(users: &[(&str, &str)]) -> anyhow::Result<String> {
    let mut file = String::new();
    for (user, password) in users {
        let hash = bcrypt::hash_with_result(password, 4)?.format_for_version(bcrypt::Version::TwoY);
        file.push_str(user);
        file.push(':');
        file.push_str(&hash);
        file.push('\n');
    }
    Ok(file)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    #[test]
    fn renders_verifiable_2y_hashes() {
        let file = super::htpasswd(&[("alice", "s3cret"), ("bob", "hunter2")]).unwrap();
        let lines: Vec<&str> = file.lines().collect();
        assert_eq!(lines.len(), 2);
        let (user, hash) = lines[0].split_once(':').unwrap();
        assert_eq!(user, "alice");
        assert!(hash.starts_with("$2y$04$"), "{hash}");
        assert!(bcrypt::verify("s3cret", hash).unwrap());
        assert!(!bcrypt::verify("wrong", hash).unwrap());
    }
}
