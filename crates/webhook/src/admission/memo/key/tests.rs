use super::*;
use serde_json::{json, Value};

/// The derived text, as the hash is fed it (the namespace's bytes first).
fn text(object: &str) -> String {
    #[derive(Default)]
    struct Recorded(Vec<u8>);
    impl Hasher for Recorded {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.extend_from_slice(bytes);
        }
    }
    let mut recorded = Recorded::default();
    PodKey {
        namespace: "",
        object,
    }
    .hash(&mut recorded);
    let prefix = b"decision\xff\xff";
    String::from_utf8_lossy(recorded.0.strip_prefix(prefix).unwrap()).into_owned()
}

fn key(namespace: &str, object: &Value) -> u128 {
    let object = serde_json::to_string(object).unwrap();
    crate::table::Table::<super::super::Entry>::key(&PodKey {
        namespace,
        object: &object,
    })
}

#[test]
fn the_text_leaves_out_what_differs_between_pods_of_one_template() {
    let object = r#"{"metadata":{"name":"web-7d4b9-x2k8q","generateName":"web-7d4b9-","uid":"a1","creationTimestamp":"2026-11-28T09:00:00Z","labels":{"app":"web"},"managedFields":[{"time":"2026-11-28T09:00:00Z"}]},"spec":{"containers":[{"name":"app","image":"nginx","env":[{"name":"A"}],"volumeMounts":[{"name":"kube-api-access-5drvz"}]}],"volumes":[{"name":"kube-api-access-5drvz","projected":{"sources":[]}},{"name":"m","image":{"reference":"model:1"}}],"nodeSelector":{"disk":"ssd"}},"status":{"phase":"Pending"}}"#;
    assert_eq!(
        text(object),
        r#"{"metadata":{"name":"","generateName":"web-7d4b9-","uid":"","creationTimestamp":"","labels":{"app":"web"},},"spec":{"containers":[{"name":"app","image":"nginx",,}],"volumes":[{"name":"",},{"name":"","image":{"reference":"model:1"}}],"nodeSelector":{"disk":"ssd"}},}"#
    );
    // A name not generated from generateName follows its metadata whole; spaces between
    // members are left out (they mean nothing), those inside a member kept.
    assert_eq!(
        text(r#" { "metadata" : { "name" : "db-0" , "uid" : 7 } } "#),
        r#"{"metadata" : {"name" : "","uid" : 7}"db-0"}"#
    );
    // Escaped member names are kept whole; so is what is not an object where one is read.
    assert_eq!(
        text(
            r#"{"st\u0061tus":{"a":1},"metadata":"x","spec":{"containers":{"a":1},"volumes":[1,{"name":2}]}}"#
        ),
        r#"{"st\u0061tus":{"a":1},"metadata":"x","spec":{"containers":{"a":1},"volumes":[1,{"name":2}]}}"#
    );
}

#[test]
fn what_does_not_scan_is_keyed_by_all_of_its_bytes() {
    for object in [
        r#"{"a":"#,
        r#"{"a":1"#,
        r#"{"a" 1}"#,
        "",
        r#"{"a":"\"}"#,
        "{}}",
    ] {
        let mut recorded = Vec::new();
        struct Into<'a>(&'a mut Vec<u8>);
        impl Hasher for Into<'_> {
            fn finish(&self) -> u64 {
                0
            }
            fn write(&mut self, bytes: &[u8]) {
                self.0.extend_from_slice(bytes);
            }
        }
        PodKey {
            namespace: "n",
            object,
        }
        .hash(&mut Into(&mut recorded));
        let mut tail = UNSCANNED.to_vec();
        tail.extend_from_slice(object.as_bytes());
        assert!(recorded.ends_with(&tail), "{object:?}");
    }
    // Scalars and arrays scan, whole.
    assert_eq!(text("[1, 2]"), "[1, 2]");
    assert_eq!(text("null"), "null");
}

/// A pod of a Deployment as the apiserver sends it, as it would send another pod of the same
/// ReplicaSet (`n` picks the name, uid, times and token volume).
fn replica(n: usize) -> Value {
    noe_test_support::deployment_pod_replica("r.example/a:1", n, ["x2k8q", "7fzpl", "b9c4d"][n])
}

#[test]
fn pods_of_one_template_share_a_key_and_a_decision() {
    use noe_core::decide::{decide, plan, Facts, Lookups, Policy};
    use noe_core::Platform;
    use std::sync::Arc;

    let pods = [replica(0), replica(1), replica(2)];
    assert_ne!(pods[0], pods[1]);
    let first = key("ns", &pods[0]);
    for pod in &pods {
        assert_eq!(key("ns", pod), first);
    }
    let policy = Policy::default();
    let platforms: Arc<[Platform]> = Arc::from(vec![Platform::new("linux", "arm64", None)]);
    let lookups: Lookups = [("r.example/a:1".to_owned(), Ok(platforms))]
        .into_iter()
        .collect();
    let decisions: Vec<_> = pods
        .iter()
        .map(|pod| decide(&plan(pod, &policy), &lookups, &Facts::default(), &policy))
        .collect();
    assert!(
        decisions.iter().all(|d| *d == decisions[0]),
        "{decisions:?}"
    );
}

#[test]
fn pods_that_differ_in_anything_else_do_not() {
    let base = replica(0);
    let first = key("ns", &base);
    assert_ne!(key("other", &base), first, "the namespace");
    let changes: Vec<(&str, Value)> = vec![
        ("/metadata/labels/app", json!("api")),
        (
            "/metadata/labels/arch.noe.adevinta.com~1preferred",
            json!("arm64"),
        ),
        ("/metadata/annotations", json!({"a": "b"})),
        ("/metadata/generateName", json!("api-5d8c7b9f6-")),
        ("/metadata/name", json!("web-5d8c7b9f6-x2k8q-long")),
        ("/metadata/name", json!(null)),
        ("/metadata/namespace", json!("other")),
        ("/metadata/uid", json!(7)),
        ("/metadata/ownerReferences/0/kind", json!("DaemonSet")),
        ("/metadata/ownerReferences/0/controller", json!(false)),
        ("/spec/nodeName", json!("node-1")),
        ("/spec/containers/0/image", json!("r.example/b:1")),
        ("/spec/containers/0/name", json!("c9")),
        (
            "/spec/initContainers",
            json!([{"name": "i", "image": "busybox"}]),
        ),
        (
            "/spec/ephemeralContainers",
            json!([{"name": "d", "image": "busybox"}]),
        ),
        ("/spec/nodeSelector", json!({"kubernetes.io/arch": "amd64"})),
        ("/spec/affinity", json!({"nodeAffinity": {}})),
        ("/spec/tolerations/0/effect", json!("NoSchedule")),
        ("/spec/os", json!({"name": "windows"})),
        ("/spec/imagePullSecrets", json!([{"name": "regcred"}])),
        ("/spec/serviceAccountName", json!("builder")),
        ("/spec/volumes/0/image", json!({"reference": "model:1"})),
        ("/spec/schedulingGates", json!([{"name": "g"}])),
        ("/spec/futureMember", json!(1)),
        ("/kind", json!("Pod2")),
    ];
    for (pointer, value) in changes {
        let mut pod = base.clone();
        let (parent, member) = pointer.rsplit_once('/').unwrap();
        let member = member.replace("~1", "/");
        match pod.pointer_mut(parent).unwrap() {
            Value::Array(items) => items[member.parse::<usize>().unwrap()] = value,
            Value::Object(map) => {
                map.insert(member, value);
            }
            other => panic!("{other}"),
        }
        assert_ne!(key("ns", &pod), first, "{pointer}");
    }
    // Two containers in the other order; a container more.
    let mut pod = base.clone();
    let container = pod["spec"]["containers"][0].clone();
    let mut second = container.clone();
    second["name"] = json!("c1");
    pod["spec"]["containers"] = json!([container.clone(), second.clone()]);
    let two = key("ns", &pod);
    pod["spec"]["containers"] = json!([second, container]);
    assert_ne!(key("ns", &pod), two);
    assert_ne!(two, first);
}

#[test]
fn names_are_generated_from_their_generate_name_only() {
    let name = |name: &str, generate_name: Option<&str>| {
        let object = match generate_name {
            Some(g) => format!(r#"{{"metadata":{{"name":"{name}","generateName":"{g}"}}}}"#),
            None => format!(r#"{{"metadata":{{"name":"{name}"}}}}"#),
        };
        !text(&object).contains(name)
    };
    assert!(name("web-abcde", Some("web-")));
    assert!(!name("web-abcdef", Some("web-")));
    assert!(!name("web-abcd", Some("web-")));
    assert!(!name("api-abcde", Some("web-")));
    assert!(!name("web-abcde", None));
    assert!(!name("web-abcde", Some("")) || "web-abcde".len() == 5);
    let long = "g".repeat(70);
    let generated = format!("{}{}", &long[..58], "abcde");
    assert!(name(&generated, Some(&long)));
    assert!(!name(r"web-\u0061bcd", Some("web-")));
}

/// Each member the key leaves out, changed alone (as another pod of the template, or anyone
/// writing a pod, may change it): the same key, and the same decision on the whole pod for
/// images of one arch, of two, and of none in common.
/// (A member left out that is added or removed changes the key: it leaves one slot more or
/// less. Pods of one template have the same members, so that only costs a miss.)
#[test]
fn each_member_left_out_changes_neither_the_key_nor_the_decision() {
    use noe_core::decide::{decide, plan, Facts, Lookups, Policy};
    use noe_core::Platform;
    use std::sync::Arc;

    let base = replica(0);
    let first = key("ns", &base);
    let changes: Vec<(&str, Value)> = vec![
        ("/metadata/name", json!("web-5d8c7b9f6-zzzzz")),
        (
            "/metadata/uid",
            json!("ffffffff-1111-4222-8333-444444444444"),
        ),
        ("/metadata/creationTimestamp", json!("2027-01-01T00:00:00Z")),
        (
            "/metadata/managedFields/0/time",
            json!("2027-01-01T00:00:00Z"),
        ),
        ("/metadata/managedFields", json!([])),
        ("/metadata/managedFields/0/manager", json!("kubectl")),
        ("/spec/volumes/0/name", json!("kube-api-access-zzzzz")),
        ("/spec/volumes/0/projected", json!({"sources": []})),
        (
            "/spec/containers/0/env",
            json!([{"name": "B", "value": "2"}]),
        ),
        ("/spec/containers/0/resources", json!({})),
        ("/spec/containers/0/livenessProbe", json!(null)),
        ("/spec/containers/0/volumeMounts/0/name", json!("other")),
        (
            "/spec/containers/0/securityContext",
            json!({"privileged": true}),
        ),
        ("/spec/containers/0/ports", json!([1, {"a": "b"}])),
        ("/status", json!({"phase": "Running", "podIP": "10.0.0.1"})),
        ("/status/startTime", json!("2027-01-01T00:00:00Z")),
    ];
    let policy = Policy::default();
    let amd64 = Platform::new("linux", "amd64", None);
    let arm64 = Platform::new("linux", "arm64", None);
    let windows = Platform::new("windows", "amd64", None);
    for (pointer, value) in changes {
        let mut pod = base.clone();
        let (parent, member) = pointer.rsplit_once('/').unwrap();
        match pod.pointer_mut(parent).unwrap() {
            Value::Array(items) => items[member.parse::<usize>().unwrap()] = value,
            Value::Object(map) => {
                map.insert(member.to_owned(), value);
            }
            other => panic!("{other}"),
        }
        assert_ne!(pod, base, "{pointer}");
        assert_eq!(key("ns", &pod), first, "{pointer}");
        for platforms in [
            vec![amd64.clone(), arm64.clone()],
            vec![arm64.clone()],
            vec![windows.clone()],
        ] {
            let lookups: Lookups = [("r.example/a:1".to_owned(), Ok(Arc::from(platforms)))]
                .into_iter()
                .collect();
            let decided =
                |pod: &Value| decide(&plan(pod, &policy), &lookups, &Facts::default(), &policy);
            assert_eq!(decided(&pod), decided(&base), "{pointer}");
        }
    }
}
