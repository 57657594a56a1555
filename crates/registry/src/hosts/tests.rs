use std::path::Path;

use super::*;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[tokio::test]
async fn reads_hosts_toml_under_the_containerd_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("etc-containerd");
    write(&root.join("config.toml"), "version = 2\n");
    // certs.d under the directory (no config_path set).
    write(
        &root.join("certs.d/127.0.0.1:5000/hosts.toml"),
        "server = \"http://127.0.0.1:5000\"\n[host.\"http://127.0.0.1:5001\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
    );
    write(
        &root.join("certs.d/_default/hosts.toml"),
        "[host.\"https://default-mirror.corp\"]\n",
    );
    // A second, separate config file with config_path pointing elsewhere.
    let other = tmp.path().join("other/config.toml");
    let other_certs = tmp.path().join("other-certs");
    write(
        &other,
        &format!(
            "version = 3\n[plugins.\"io.containerd.cri.v1.images\".registry]\n  config_path = \"{}\"\n",
            other_certs.display(),
        ),
    );
    write(&other_certs.join("quay.io/ca.crt"), "pem");
    let hosts = ContainerdHosts::new(ContainerdSource::new(vec![root, other]));

    let local_hosts = hosts.hosts("127.0.0.1:5000").await.unwrap();
    assert_eq!(
        local_hosts
            .endpoints()
            .iter()
            .map(|e| e.api_base())
            .collect::<Vec<_>>(),
        ["http://127.0.0.1:5001/v2", "http://127.0.0.1:5000/v2"]
    );
    // No directory of its own: _default applies, with the registry as server.
    let fallback = hosts.hosts("gcr.io").await.unwrap();
    assert_eq!(
        fallback
            .endpoints()
            .iter()
            .map(|e| e.url.as_str())
            .collect::<Vec<_>>(),
        ["https://default-mirror.corp/", "https://gcr.io/"]
    );
    // docker's certs.d layout: a directory with CA files and no hosts.toml.
    let quay_hosts = hosts.hosts("quay.io").await.unwrap();
    assert_eq!(
        quay_hosts.server().unwrap().ca,
        [other_certs.join("quay.io/ca.crt")]
    );
}

#[tokio::test]
async fn no_hosts_dirs_means_no_hosts_config() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("config.toml");
    write(&file, "");
    let hosts = ContainerdHosts::new(ContainerdSource::new(vec![file]));
    assert!(hosts.hosts("docker.io").await.is_none());
}

#[tokio::test]
async fn deprecated_cri_mirrors_without_config_path() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("config.toml");
    write(
        &file,
        r#"
version = 2
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
  endpoint = ["https://mirror.gcr.io", "http://10.0.0.1:5000"]
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."quay.io"]
  endpoint = ["https://quay.io", "https://quay-mirror.corp"]
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."*"]
  endpoint = ["https://catch-all.corp"]
"#,
    );
    let hosts = ContainerdHosts::new(ContainerdSource::new(vec![file]));
    let urls = |hosts: HostsConfig| -> Vec<(String, bool)> {
        hosts
            .endpoints()
            .iter()
            .map(|e| (e.api_base(), e.mirror))
            .collect()
    };
    assert_eq!(
        urls(hosts.hosts("docker.io").await.unwrap()),
        [
            ("https://mirror.gcr.io/v2".to_owned(), true),
            ("http://10.0.0.1:5000/v2".to_owned(), true),
            ("https://registry-1.docker.io/v2".to_owned(), false),
        ]
    );
    // The server listed among the endpoints keeps its place.
    assert_eq!(
        urls(hosts.hosts("quay.io").await.unwrap()),
        [
            ("https://quay.io/v2".to_owned(), false),
            ("https://quay-mirror.corp/v2".to_owned(), true),
        ]
    );
    assert_eq!(
        urls(hosts.hosts("ghcr.io").await.unwrap()),
        [
            ("https://catch-all.corp/v2".to_owned(), true),
            ("https://ghcr.io/v2".to_owned(), false),
        ]
    );
}
