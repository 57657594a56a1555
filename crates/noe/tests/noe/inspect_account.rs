//! A pod's identity on the command line: `noe inspect --service-account NAMESPACE/NAME` and
//! `noe explain --credential-provider-sa-tokens`. A credential provider plugin with
//! `tokenAttributes` gets a token of that account from the scripted API's TokenRequest and
//! the account's annotations, and its credential opens a real htpasswd registry; without a
//! cluster, or for an account that does not exist, inspect refuses clearly. A plugin answer the
//! registry refuses is renewed once, as a lookup renews it.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use noe_test_support::{push_standard_fixtures, service_account_json, KubeApi, Registry, Resource};

use super::harness::run_noe;

const AUDIENCE: &str = "registry.example";
pub(super) const ROLE: &str = "example.com/registry-role";

/// A plugin that answers the registry's password only when its request carries a token of
/// `namespace/account` for the audience and the account's role annotation (`bin/` and
/// `providers.yaml` under `dir`). Shared with the gate's end-to-end test.
pub(super) fn plugin(dir: &Path, host: &str, namespace: &str, account: &str) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        r#"#!/bin/sh
req=$(cat)
printf '%s' "$req" | grep -q '"serviceAccountToken":"sa-token\.{namespace}\.{account}\.{AUDIENCE}\.' || {{ echo "no token of {namespace}/{account} for the audience" >&2; exit 3; }}
printf '%s' "$req" | grep -qF '"serviceAccountAnnotations":{{"{ROLE}":"puller"}}' || {{ echo "no role annotation" >&2; exit 4; }}
printf '{{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Registry","cacheDuration":"5m","auth":{{"{host}":{{"username":"alice","password":"s3cret"}}}}}}'
"#
    );
    let path = bin.join("registry-login");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        dir.join("providers.yaml"),
        format!(
            "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n  - name: registry-login\n    matchImages: [\"{host}\"]\n    defaultCacheDuration: 1m\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n    tokenAttributes:\n      serviceAccountTokenAudience: {AUDIENCE}\n      requireServiceAccount: true\n      requiredServiceAccountAnnotationKeys: [{ROLE}]\n      cacheType: ServiceAccount\n"
        ),
    )
    .unwrap();
}

/// `--image-credential-provider-bin-dir` and `--image-credential-provider-config` for the
/// plugin [`plugin`] wrote under `dir`.
pub(super) fn plugin_flags(dir: &Path) -> [String; 2] {
    [
        format!(
            "--image-credential-provider-bin-dir={}",
            dir.join("bin").display()
        ),
        format!(
            "--image-credential-provider-config={}",
            dir.join("providers.yaml").display()
        ),
    ]
}

/// A real htpasswd registry holding the standard fixtures that only the plugin's credential
/// opens, the plugin under `dir` and the ServiceAccount `namespace/account` (its role annotation
/// set) in `api`: what a pod running as that account is looked up with.
pub(super) async fn private_registry(
    dir: &Path,
    api: &KubeApi,
    namespace: &str,
    account: &str,
) -> (Registry, noe_test_support::Fixtures) {
    let registry = Registry::builder()
        .htpasswd("alice", "s3cret")
        .start()
        .await
        .unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    plugin(dir, &registry.host(), namespace, account);
    api.put(
        Resource::ServiceAccounts,
        namespace,
        service_account_json(namespace, account, &[(ROLE, "puller")]),
    );
    (registry, fixtures)
}

/// What both tests run against: a real htpasswd registry holding the standard fixtures, the
/// scripted API with the ServiceAccount `team/app` (its role annotation set), the plugin and its
/// config, and a kubeconfig for the API, under `dir`.
struct World {
    registry: Registry,
    image: String,
    host: String,
    api: KubeApi,
    dir: tempfile::TempDir,
    kubeconfig: std::path::PathBuf,
}

impl World {
    async fn start() -> Self {
        let api = KubeApi::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (registry, fixtures) = private_registry(dir.path(), &api, "team", "app").await;
        let image = fixtures.oci_index.reference();
        let host = registry.host();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, api.kubeconfig_yaml()).unwrap();
        Self {
            registry,
            image,
            host,
            api,
            dir,
            kubeconfig,
        }
    }
}

#[tokio::test]
async fn inspect_resolves_as_a_service_account() {
    let World {
        registry: _registry,
        image,
        host,
        api,
        dir,
        kubeconfig,
    } = World::start().await;
    let none = dir.path().join("absent");
    let args = |account: &str, kubeconfig: &Path| -> Vec<String> {
        let mut args = vec![
            "inspect".to_owned(),
            format!("--insecure-registries={host}"),
            format!(
                "--allow-registry-cidrs={}",
                noe_test_support::LOOPBACK_CIDRS
            ),
            format!("--docker-config-path={}", none.display()),
            format!("--containerd-config-path={}", none.display()),
            format!("--kubeconfig={}", kubeconfig.display()),
            "-o".to_owned(),
            "json".to_owned(),
        ];
        args.extend(plugin_flags(dir.path()));
        if !account.is_empty() {
            args.push(format!("--service-account={account}"));
        }
        args.push(image.clone());
        args
    };

    let (code, stdout, stderr) = run_noe(&args("team/app", &kubeconfig)).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let found: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        found["credentialSource"], "credential-provider:registry-login as serviceaccount team/app",
        "{found}"
    );
    let tokens = api
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/serviceaccounts/app/token"))
        .count();
    assert_eq!(tokens, 1, "one TokenRequest");

    // Without the account, the plugin is not run (it requires one): the registry refuses.
    let (code, _, stderr) = run_noe(&args("", &kubeconfig)).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("access denied"), "{stderr}");

    // An account that does not exist, and no cluster at all: refused before any lookup.
    let (code, _, stderr) = run_noe(&args("team/ghost", &kubeconfig)).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--service-account team/ghost: service account team/ghost: not found"),
        "{stderr}"
    );
    let (code, _, stderr) = run_noe(&args("team/app", &none)).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--service-account team/app: needs the Kubernetes API"),
        "{stderr}"
    );
    let (code, _, stderr) = run_noe(&args("team", &kubeconfig)).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("NAMESPACE/NAME"), "{stderr}");

    // A plugin whose first answer the registry refuses: inspect renews it once, as a lookup
    // does, and the second answer opens the registry.
    let log = dir.path().join("runs.log");
    let plugin = dir.path().join("bin").join("registry-login");
    std::fs::write(
        &plugin,
        format!(
            r#"#!/bin/sh
cat > /dev/null
echo run >> "{log}"
password=s3cret
[ "$(wc -l < "{log}")" -eq 1 ] && password=stale
printf '{{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Registry","cacheDuration":"5m","auth":{{"{host}":{{"username":"alice","password":"%s"}}}}}}' "$password"
"#,
            log = log.display(),
        ),
    )
    .unwrap();
    // Without `tokenAttributes`: an answer bound to an account is not renewed (it is the
    // account's, asked again with a new token on the next lookup).
    std::fs::write(
        dir.path().join("providers.yaml"),
        format!(
            "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n  - name: registry-login\n    matchImages: [\"{host}\"]\n    defaultCacheDuration: 1m\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        ),
    )
    .unwrap();
    let (code, stdout, stderr) = run_noe(&args("", &kubeconfig)).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("credential-provider:registry-login"),
        "{stdout}"
    );
    let runs = std::fs::read_to_string(&log).unwrap().lines().count();
    assert_eq!(runs, 2, "one renewal");
}

/// `noe explain --credential-provider-sa-tokens` asks the cluster for each pod's ServiceAccount
/// as the server does: the pod's image is looked up with its account's credential. Without the
/// flag, the plugin (which requires an account) gives nothing and the lookup fails (exit 3).
#[tokio::test]
async fn explain_looks_a_pod_up_as_its_service_account() {
    let World {
        registry: _registry,
        image,
        host,
        api,
        dir,
        kubeconfig,
    } = World::start().await;
    let pod = dir.path().join("pod.yaml");
    std::fs::write(
        &pod,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: web, namespace: team}}\nspec:\n  serviceAccountName: app\n  containers: [{{name: web, image: \"{image}\"}}]\n"
        ),
    )
    .unwrap();
    let none = dir.path().join("absent");
    let args = |extra: &[&str], kubeconfig: &Path| -> Vec<String> {
        let mut args = vec![
            "explain".to_owned(),
            "-f".to_owned(),
            pod.display().to_string(),
            "-o".to_owned(),
            "json".to_owned(),
            format!("--insecure-registries={host}"),
            format!(
                "--allow-registry-cidrs={}",
                noe_test_support::LOOPBACK_CIDRS
            ),
            format!("--docker-config-path={}", none.display()),
            format!("--containerd-config-path={}", none.display()),
            format!("--kubeconfig={}", kubeconfig.display()),
        ];
        args.extend(plugin_flags(dir.path()));
        args.extend(extra.iter().map(|flag| (*flag).to_owned()));
        args
    };
    let tokens = || {
        api.requests()
            .iter()
            .filter(|r| r.method == "POST" && r.path.ends_with("/serviceaccounts/app/token"))
            .count()
    };

    let (code, stdout, stderr) =
        run_noe(&args(&["--credential-provider-sa-tokens"], &kubeconfig)).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(tokens(), 1, "one TokenRequest");

    let (code, stdout, stderr) = run_noe(&args(&[], &kubeconfig)).await;
    assert_eq!(
        code, 3,
        "a failed lookup without the account: {stdout}\n{stderr}"
    );
    assert_eq!(tokens(), 1, "no cluster asked without the flag");

    let (code, _, stderr) = run_noe(&args(&["--credential-provider-sa-tokens"], &none)).await;
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("--credential-provider-sa-tokens needs the Kubernetes API"),
        "{stderr}"
    );
}
