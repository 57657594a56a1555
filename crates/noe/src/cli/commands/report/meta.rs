//! What the HTML page says about how it was made: when, from what (the kubeconfig context, or
//! the files read), and the command line, with anything that looks like a secret left out.

use noe_core::report::render::html::Meta;

use crate::config::{KubeSettings, ReportSettings};

/// Flag names whose value is never shown.
const SECRET_WORDS: [&str; 4] = ["password", "token", "secret", "key"];

/// The page's [`Meta`] for this run.
pub fn html_meta(settings: &ReportSettings, kube: &KubeSettings) -> Meta {
    let generated = k8s_openapi::chrono::Utc::now()
        .to_rfc3339_opts(k8s_openapi::chrono::SecondsFormat::Secs, true);
    let source = if settings.files.is_empty() {
        match context(kube) {
            Some(context) => format!("cluster, kubeconfig context {context}"),
            None => "cluster, in-cluster configuration".to_owned(),
        }
    } else {
        let files: Vec<String> = settings
            .files
            .iter()
            .map(|f| f.display().to_string())
            .collect();
        format!("files {}", files.join(", "))
    };
    Meta {
        generated,
        source,
        command: command_line(std::env::args()),
    }
}

/// The current context of the kubeconfig kube reads (`--kubeconfig`, else `$KUBECONFIG` or
/// `~/.kube/config`); `None` in a cluster or without one.
fn context(kube: &KubeSettings) -> Option<String> {
    let config = match &kube.kubeconfig {
        Some(path) => kube::config::Kubeconfig::read_from(path).ok()?,
        None => kube::config::Kubeconfig::read().ok()?,
    };
    config.current_context
}

/// `args` as one line: each word quoted when it needs it, values of flags named like secrets
/// and the user part of URLs replaced by `***`.
pub fn command_line(args: impl Iterator<Item = String>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut hide_next = false;
    for (i, arg) in args.enumerate() {
        let word = if i == 0 {
            std::path::Path::new(&arg)
                .file_name()
                .map_or_else(|| arg.clone(), |name| name.to_string_lossy().into_owned())
        } else if hide_next {
            "***".to_owned()
        } else {
            redacted(&arg)
        };
        hide_next = arg.starts_with('-')
            && !arg.contains('=')
            && SECRET_WORDS
                .iter()
                .any(|w| arg.to_ascii_lowercase().contains(w));
        out.push(quoted(&word));
    }
    out.join(" ")
}

fn redacted(arg: &str) -> String {
    if let Some((flag, _)) = arg.split_once('=') {
        if flag.starts_with('-')
            && SECRET_WORDS
                .iter()
                .any(|w| flag.to_ascii_lowercase().contains(w))
        {
            return format!("{flag}=***");
        }
    }
    match (arg.find("://"), arg.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}***{}", &arg[..scheme + 3], &arg[at..])
        }
        _ => arg.to_owned(),
    }
}

fn quoted(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+*".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_leave_secrets_out() {
        let line = |args: &[&str]| command_line(args.iter().map(|a| (*a).to_owned()));
        assert_eq!(
            line(&["/usr/bin/noe", "report", "-A", "-o", "html"]),
            "noe report -A -o html"
        );
        assert_eq!(
            line(&["noe", "report", "-l", "app in (a,b)"]),
            "noe report -l 'app in (a,b)'"
        );
        assert_eq!(
            line(&[
                "noe",
                "report",
                "--shared-cache-url=rediss://user:pw@cache:6379"
            ]),
            "noe report --shared-cache-url=rediss://***@cache:6379"
        );
        assert_eq!(
            line(&["noe", "--registry-password", "hunter2", "--token=abc", "x"]),
            "noe --registry-password *** --token=*** x"
        );
        assert_eq!(line(&["noe", "it's"]), "noe 'it'\\''s'");
    }
}
