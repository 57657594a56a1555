//! Where `noe report`'s workloads come from: files (YAML documents, JSON `List`s and typed
//! lists such as `DeploymentList`, `kubectl get -o json` output) or a cluster, listed kind by
//! kind in pages. A list the API refuses or an object that cannot be read is an error of the
//! report's summary, not the end of the run.

use std::collections::HashMap;
use std::io::Read as _;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Node, Pod, ReplicationController, ServiceAccount};
use k8s_openapi::NamespaceResourceScope;
use kube::api::ListParams;
use kube::{Api, Client};
use noe_core::report::{read, Placement, Read, SourceError, Workload};
use noe_webhook::resolve::one_line;
use noe_webhook::resolve::pull_secrets::PullSecrets;
use serde_json::Value;

use crate::config::{ReportScope, ReportSettings};

/// Largest file read (a whole cluster's `kubectl get -o json` fits).
pub const MAX_FILE_BYTES: u64 = 512 << 20;
/// Most objects read in one run, files and lists together.
pub const MAX_OBJECTS: usize = 1_000_000;
/// Objects per list page.
const PAGE: u32 = 500;
/// Longest wait for one page.
const PAGE_TIMEOUT: Duration = Duration::from_secs(60);

/// What the source holds.
#[derive(Default)]
pub struct Collected {
    pub workloads: Vec<Workload>,
    /// Owned objects and nodes (only with `--include-pods`).
    pub placement: Placement,
    pub errors: Vec<SourceError>,
    /// The pods' pull secrets, read through the API (connected only).
    pub pull_secrets: Option<PullSecrets>,
    /// `(namespace, name)` of each ServiceAccount → its `imagePullSecrets` (connected only).
    pub service_accounts: HashMap<(String, String), Vec<String>>,
}

impl Collected {
    /// Gives each workload without pull secrets of its own those of its ServiceAccount, as the
    /// ServiceAccount admission plugin does for its pods.
    pub fn service_account_secrets(&mut self) {
        for workload in &mut self.workloads {
            if !workload.pull_secrets.is_empty() {
                continue;
            }
            let key = (workload.namespace.clone(), workload.service_account.clone());
            if let Some(secrets) = self.service_accounts.get(&key) {
                workload.pull_secrets.clone_from(secrets);
            }
        }
    }
}

/// Sorts what is read into the report's parts.
struct Collector<'a> {
    settings: &'a ReportSettings,
    /// The objects are from files: the namespace and selector are applied here.
    local: bool,
    seen: usize,
    out: Collected,
}

impl<'a> Collector<'a> {
    fn new(settings: &'a ReportSettings, local: bool) -> Self {
        Self {
            settings,
            local,
            seen: 0,
            out: Collected::default(),
        }
    }

    /// Room for another object.
    fn full(&self) -> bool {
        self.seen >= MAX_OBJECTS
    }

    fn add(&mut self, object: &Value) {
        self.seen = self.seen.saturating_add(1);
        if self.local && !self.selected(object) {
            return;
        }
        if object.get("kind").and_then(Value::as_str) == Some("ServiceAccount") {
            self.service_account(object);
            return;
        }
        match read(object) {
            Ok(Read::Workload(workload)) => self.out.workloads.push(workload),
            Ok(Read::Owned(owned)) if self.settings.include_pods => {
                self.out.placement.owned.push(owned);
            }
            Ok(Read::Node { name, arch }) if self.settings.include_pods => {
                self.out.placement.nodes.insert(name, arch);
            }
            Ok(_) => {}
            Err(error) => {
                let (kind, namespace, name) = noe_core::workload::identity(object);
                let name: String = name.chars().take(253).collect();
                self.out.errors.push(SourceError {
                    source: format!(
                        "{} {namespace}/{name}",
                        kind.chars().take(63).collect::<String>()
                    ),
                    message: error.to_string(),
                });
            }
        }
    }

    /// A ServiceAccount's `imagePullSecrets` names (bounded like a pod's).
    fn service_account(&mut self, object: &Value) {
        let (_, namespace, name) = noe_core::workload::identity(object);
        let secrets: Vec<String> = object
            .get("imagePullSecrets")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|secret| secret.get("name").and_then(Value::as_str))
            .filter(|name| !name.is_empty() && name.len() <= 253)
            .take(noe_core::report::objects::MAX_IMAGES_PER_WORKLOAD)
            .map(str::to_owned)
            .collect();
        if !secrets.is_empty() && namespace.len() <= 63 && name.len() <= 253 {
            self.out
                .service_accounts
                .insert((namespace.to_owned(), name.to_owned()), secrets);
        }
    }

    /// In the files: the object is in `-n`'s namespace (nodes are in every one) and matches
    /// `-l`.
    fn selected(&self, object: &Value) -> bool {
        let (kind, namespace, _) = noe_core::workload::identity(object);
        if let ReportScope::Namespace(wanted) = &self.settings.scope {
            if kind != "Node" && namespace != wanted {
                return false;
            }
        }
        match &self.settings.selector {
            Some((_, selector)) => {
                selector.matches_json(object.pointer("/metadata/labels").unwrap_or(&Value::Null))
            }
            None => true,
        }
    }

    fn error(&mut self, source: String, message: String) {
        self.out.errors.push(SourceError { source, message });
    }
}

/// Reads every file (`-` is stdin), one document at a time (a large file is never held as a
/// whole tree); `Err` when one cannot be read or parsed.
pub fn from_files(settings: &ReportSettings) -> Result<Collected, String> {
    use serde::Deserialize as _;
    let mut collector = Collector::new(settings, true);
    for file in &settings.files {
        let name = file.display().to_string();
        let text = read_file(file).map_err(|error| format!("cannot read {name}: {error}"))?;
        for document in yaml_serde::Deserializer::from_str(&text) {
            let object = Value::deserialize(document)
                .map_err(|error| format!("{name} is not YAML or JSON: {error}"))?;
            for object in list_items(object) {
                if collector.full() {
                    collector.error(
                        name.clone(),
                        format!("more than {MAX_OBJECTS} objects: the rest is not read"),
                    );
                    return Ok(collector.out);
                }
                collector.add(&object);
            }
        }
    }
    Ok(collector.out)
}

fn read_file(file: &Path) -> std::io::Result<String> {
    let mut text = String::new();
    let reader: Box<dyn std::io::Read> = if file.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(std::fs::File::open(file)?)
    };
    reader
        .take(MAX_FILE_BYTES.saturating_add(1))
        .read_to_string(&mut text)?;
    if u64::try_from(text.len()).unwrap_or(u64::MAX) > MAX_FILE_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {} MiB",
            MAX_FILE_BYTES >> 20
        )));
    }
    Ok(text)
}

/// A `List` (`kubectl get -o json`) or a typed list as the API returns it (`DeploymentList`:
/// items without `kind`, given the list's) → its items; `null` → nothing; any other object as it
/// is.
fn list_items(object: Value) -> Vec<Value> {
    if object.is_null() {
        return Vec::new();
    }
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(item_kind) = kind.strip_suffix("List") else {
        return vec![object];
    };
    let item_kind = item_kind.to_owned();
    let api_version = object.get("apiVersion").cloned();
    let Value::Object(mut list) = object else {
        return Vec::new();
    };
    let Some(Value::Array(items)) = list.remove("items") else {
        return vec![Value::Object(list)];
    };
    items
        .into_iter()
        .filter(Value::is_object)
        .map(|mut item| {
            let untyped = item
                .get("kind")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
            if untyped && !item_kind.is_empty() {
                item["kind"] = Value::String(item_kind.clone());
                if let Some(api_version) = &api_version {
                    item["apiVersion"] = api_version.clone();
                }
            }
            item
        })
        .collect()
}

/// Lists the workloads of the cluster (and with `--include-pods` its nodes), kind by kind;
/// `Err` only when no list at all could be read.
pub async fn from_cluster(client: &Client, settings: &ReportSettings) -> Result<Collected, String> {
    let namespace = match &settings.scope {
        ReportScope::All => None,
        ReportScope::Namespace(namespace) => Some(namespace.clone()),
        ReportScope::Current => Some(client.default_namespace().to_owned()),
    };
    let namespace = namespace.as_deref();
    let mut collector = Collector::new(settings, false);
    let mut lists = 0usize;
    let mut failed = 0usize;
    let mut count = |ok: bool| {
        lists = lists.saturating_add(1);
        if !ok {
            failed = failed.saturating_add(1);
        }
    };
    count(
        list(
            api::<Deployment>(client, namespace),
            "deployments",
            namespace,
            &mut collector,
        )
        .await,
    );
    count(
        list(
            api::<StatefulSet>(client, namespace),
            "statefulsets",
            namespace,
            &mut collector,
        )
        .await,
    );
    count(
        list(
            api::<DaemonSet>(client, namespace),
            "daemonsets",
            namespace,
            &mut collector,
        )
        .await,
    );
    count(
        list(
            api::<CronJob>(client, namespace),
            "cronjobs",
            namespace,
            &mut collector,
        )
        .await,
    );
    count(
        list(
            api::<Job>(client, namespace),
            "jobs",
            namespace,
            &mut collector,
        )
        .await,
    );
    count(
        list(
            api::<ReplicaSet>(client, namespace),
            "replicasets",
            namespace,
            &mut collector,
        )
        .await,
    );
    count(
        list(
            api::<ReplicationController>(client, namespace),
            "replicationcontrollers",
            namespace,
            &mut collector,
        )
        .await,
    );
    count(
        list(
            api::<Pod>(client, namespace),
            "pods",
            namespace,
            &mut collector,
        )
        .await,
    );
    // The pull secrets of pods that name none of their own.
    count(
        list(
            api::<ServiceAccount>(client, namespace),
            "serviceaccounts",
            namespace,
            &mut collector,
        )
        .await,
    );
    if settings.include_pods {
        count(
            list(
                Api::<Node>::all(client.clone()),
                "nodes",
                None,
                &mut collector,
            )
            .await,
        );
    }
    if failed == lists {
        let first = collector
            .out
            .errors
            .first()
            .map(|e| format!("{}: {}", e.source, e.message))
            .unwrap_or_default();
        return Err(format!("cannot list any workload: {first}"));
    }
    collector.out.pull_secrets = Some(PullSecrets::new(client.clone()));
    collector.out.service_account_secrets();
    Ok(collector.out)
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

/// Lists every page of one kind into `collector`; `false` (with an error recorded) when the API
/// refused or did not answer.
async fn list<K>(
    api: Api<K>,
    plural: &str,
    namespace: Option<&str>,
    collector: &mut Collector<'_>,
) -> bool
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let source = match namespace {
        Some(namespace) => format!("list {plural} in {namespace}"),
        None => format!("list {plural}"),
    };
    let mut params = ListParams::default().limit(PAGE);
    if let Some((selector, _)) = &collector.settings.selector {
        params = params.labels(selector);
    }
    loop {
        let page = match tokio::time::timeout(PAGE_TIMEOUT, api.list(&params)).await {
            Ok(Ok(page)) => page,
            Ok(Err(error)) => {
                collector.error(source, one_line(&error));
                return false;
            }
            Err(_) => {
                collector.error(source, format!("no answer within {PAGE_TIMEOUT:?}"));
                return false;
            }
        };
        for object in page.items {
            if collector.full() {
                collector.error(
                    source,
                    format!("more than {MAX_OBJECTS} objects: the rest is not read"),
                );
                return true;
            }
            match serde_json::to_value(&object) {
                Ok(value) => collector.add(&value),
                Err(error) => collector.error(source.clone(), error.to_string()),
            }
        }
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn lists_are_read_as_their_items() {
        let typed = json!({"apiVersion": "apps/v1", "kind": "DeploymentList",
            "items": [{"metadata": {"name": "a"}}, null, {"kind": "Deployment", "metadata": {"name": "b"}}]});
        let items = super::list_items(typed);
        assert_eq!(items.len(), 2);
        assert_eq!(items[0]["kind"], "Deployment");
        assert_eq!(items[0]["apiVersion"], "apps/v1");
        let list = json!({"kind": "List", "items": [{"kind": "Pod"}, {"kind": "Job"}]});
        assert_eq!(super::list_items(list).len(), 2);
        assert_eq!(super::list_items(json!({"kind": "Pod"})).len(), 1);
        assert_eq!(super::list_items(serde_json::Value::Null).len(), 0);
        // A list without items is no object of the report.
        assert_eq!(super::list_items(json!({"kind": "List"})).len(), 1);
    }
}
