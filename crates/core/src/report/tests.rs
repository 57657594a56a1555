#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::{json, Value};

use super::*;

fn platforms(list: &[&str]) -> Answer {
    let parsed: Vec<Platform> = list
        .iter()
        .map(|p| {
            let parts: Vec<&str> = p.split('/').collect();
            match parts.as_slice() {
                ["*"] => Platform::any(),
                [os, arch] => Platform::new(*os, *arch, None),
                [os, arch, variant] => Platform::new(*os, *arch, Some(variant)),
                _ => panic!("{p}"),
            }
        })
        .collect();
    Ok(parsed.into())
}

fn failed(kind: &str) -> Answer {
    Err(Arc::new(LookupFailure {
        kind: kind.to_owned(),
        message: format!("{kind} happened"),
    }))
}

fn workload(object: Value) -> Workload {
    match read(&object).unwrap() {
        Read::Workload(w) => w,
        other => panic!("{other:?}"),
    }
}

fn deployment(name: &str, replicas: u64, containers: Value, init: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"replicas": replicas, "template": {"spec": {
            "containers": containers, "initContainers": init}}}
    })
}

fn arm64() -> Vec<String> {
    vec!["arm64".to_owned()]
}

#[test]
fn the_verdict_does_not_depend_on_container_order_and_init_containers_count() {
    let both = ["linux/amd64", "linux/arm64"];
    let answers = |order: &[&str]| -> Vec<Answer> {
        order
            .iter()
            .map(|image| match *image {
                "amd-only:1" => platforms(&["linux/amd64"]),
                _ => platforms(&both),
            })
            .collect()
    };
    // An init container that lacks arm64 blocks, wherever it stands.
    for containers in [
        json!([{"name": "a", "image": "multi:1"}, {"name": "b", "image": "multi:2"}]),
        json!([{"name": "b", "image": "multi:2"}, {"name": "a", "image": "multi:1"}]),
    ] {
        let w = workload(deployment(
            "web",
            2,
            containers,
            json!([{"name": "i", "image": "amd-only:1"}]),
        ));
        let order: Vec<&str> = w.images.iter().map(|(i, _)| i.as_str()).collect();
        let item = Item::new(w.clone(), answers(&order), &arm64());
        assert_eq!(item.verdict("arm64"), Some(Verdict::Blocked));
        assert_eq!(
            item.blocking,
            vec![("arm64".to_owned(), vec!["amd-only:1".to_owned()])]
        );
        assert_eq!(item.common, Some(vec!["linux/amd64".to_owned()]));
    }
}

#[test]
fn unknown_is_never_ready_and_a_known_blocker_wins() {
    let w = workload(deployment(
        "web",
        1,
        json!([{"image": "a:1"}, {"image": "b:1"}]),
        json!([]),
    ));
    let item = Item::new(
        w.clone(),
        vec![platforms(&["linux/arm64"]), failed("not_found")],
        &arm64(),
    );
    assert_eq!(item.verdict("arm64"), Some(Verdict::Unknown));
    assert_eq!(item.common, None);
    let item = Item::new(
        w.clone(),
        vec![platforms(&["linux/amd64"]), failed("timeout")],
        &arm64(),
    );
    assert_eq!(item.verdict("arm64"), Some(Verdict::Blocked));
    // A container image whose registry lists no platform is not known (never "any").
    let item = Item::new(
        w.clone(),
        vec![platforms(&["linux/arm64"]), platforms(&[])],
        &arm64(),
    );
    assert_eq!(item.verdict("arm64"), Some(Verdict::Unknown));
    // An override's `*` runs anywhere.
    let item = Item::new(
        w,
        vec![platforms(&["*"]), platforms(&["linux/arm64/v8"])],
        &arm64(),
    );
    assert_eq!(item.verdict("arm64"), Some(Verdict::Ready));
    assert_eq!(item.common, Some(vec!["linux/arm64".to_owned()]));
}

#[test]
fn verdicts_per_target_arch_and_the_pod_os() {
    let w = workload(deployment("web", 1, json!([{"image": "a:1"}]), json!([])));
    let targets = vec!["arm64".to_owned(), "amd64".to_owned(), "s390x".to_owned()];
    let item = Item::new(
        w,
        vec![platforms(&["linux/amd64", "linux/arm64", "windows/s390x"])],
        &targets,
    );
    let verdicts: Vec<&str> = item.verdicts.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(verdicts, ["ready", "ready", "blocked"]);
    let windows = json!({"kind": "Pod", "metadata": {"name": "w"},
        "spec": {"os": {"name": "windows"}, "containers": [{"image": "a:1"}]}});
    let item = Item::new(
        workload(windows),
        vec![platforms(&["windows/s390x", "linux/arm64"])],
        &targets,
    );
    let verdicts: Vec<&str> = item.verdicts.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(verdicts, ["blocked", "blocked", "ready"]);
    assert_eq!(item.common, Some(vec!["windows/s390x".to_owned()]));
}

#[test]
fn requests_as_the_scheduler_counts_them() {
    let spec = |spec: Value| pod_requests_of(&spec);
    fn pod_requests_of(spec: &Value) -> (String, String) {
        let r = objects::pod_requests(spec).unwrap();
        (r.cpu.to_string(), r.memory.to_string())
    }
    let c = |cpu: &str, memory: &str| json!({"resources": {"requests": {"cpu": cpu, "memory": memory}}});
    // Containers add up; limits stand for missing requests.
    assert_eq!(
        spec(
            json!({"containers": [c("250m", "64Mi"), {"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]})
        ),
        ("1250m".into(), "1088Mi".into())
    );
    // A regular init container counts when it is the largest; sidecars add up.
    let mut sidecar = c("100m", "32Mi");
    sidecar["restartPolicy"] = json!("Always");
    assert_eq!(
        spec(json!({"containers": [c("500m", "128Mi")], "initContainers": [c("2", "64Mi")]})),
        ("2".into(), "128Mi".into())
    );
    assert_eq!(
        spec(
            json!({"containers": [c("500m", "128Mi")], "initContainers": [sidecar.clone(), c("1", "16Mi")]})
        ),
        ("1100m".into(), "160Mi".into())
    );
    // Pod-level requests replace the sum for the resources they name; overhead is added.
    assert_eq!(
        spec(
            json!({"containers": [c("500m", "128Mi")], "resources": {"requests": {"cpu": "3"}},
            "overhead": {"cpu": "250m", "memory": "1Mi"}})
        ),
        ("3250m".into(), "129Mi".into())
    );
    assert_eq!(spec(json!({})), ("0".into(), "0".into()));
    let bad = objects::pod_requests(&json!({"containers": [c("lots", "1Gi")]})).unwrap_err();
    assert!(
        bad.to_string().contains("resources.requests.cpu \"lots\""),
        "{bad}"
    );
}

#[test]
fn kinds_owners_and_replicas() {
    let rs_owned = json!({"kind": "ReplicaSet", "metadata": {"name": "web-1", "namespace": "team",
        "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": true}]},
        "spec": {"template": {"spec": {"containers": [{"image": "a:1"}]}}}});
    assert!(
        matches!(read(&rs_owned).unwrap(), Read::Owned(Owner { owner_kind, .. }) if owner_kind == "Deployment")
    );
    let rs_alone = json!({"kind": "ReplicaSet", "metadata": {"name": "alone"},
        "spec": {"replicas": 4, "template": {"spec": {"containers": [{"image": "a:1"}]}}}});
    assert_eq!(workload(rs_alone).replicas, Some(4));
    let job = json!({"kind": "Job", "metadata": {"name": "j"},
        "spec": {"parallelism": 5, "completions": 3, "template": {"spec": {"containers": [{"image": "a:1"}]}}}});
    assert_eq!(workload(job).replicas, Some(3));
    let cron = json!({"kind": "CronJob", "metadata": {"name": "c"},
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"image": "a:1"}]}}}}}});
    assert_eq!(workload(cron.clone()).replicas, Some(1));
    assert_eq!(workload(cron).service_account, "default");
    let with_sa = json!({"kind": "Pod", "metadata": {"name": "p"},
        "spec": {"serviceAccountName": "builder", "imagePullSecrets": [{"name": "a"}, {"name": ""}],
            "containers": [{"image": "a:1"}]}});
    let with_sa = workload(with_sa);
    assert_eq!(
        (with_sa.service_account.as_str(), with_sa.pull_secrets),
        ("builder", vec!["a".to_owned()])
    );
    let ds = json!({"kind": "DaemonSet", "metadata": {"name": "d"},
        "spec": {"template": {"spec": {"containers": [{"image": "a:1"}]}}}});
    assert_eq!(workload(ds.clone()).replicas, None);
    let mut with_status = ds;
    with_status["status"] = json!({"desiredNumberScheduled": 7});
    assert_eq!(workload(with_status).replicas, Some(7));
    let zero = deployment("z", 0, json!([{"image": "a:1"}]), json!([]));
    assert_eq!(workload(zero).replicas, Some(0));
    let negative = json!({"kind": "Deployment", "metadata": {"name": "n"},
        "spec": {"replicas": -1, "template": {"spec": {"containers": []}}}});
    assert!(read(&negative).is_err());
    let node = json!({"kind": "Node", "metadata": {"name": "n1", "labels": {"kubernetes.io/arch": "arm64"}}});
    assert_eq!(
        read(&node).unwrap(),
        Read::Node {
            name: "n1".into(),
            arch: "arm64".into()
        }
    );
    assert_eq!(
        read(&json!({"kind": "Service", "metadata": {"name": "s"}})).unwrap(),
        Read::Other
    );
    let no_template = json!({"kind": "Deployment", "metadata": {"name": "x"}, "spec": {}});
    assert!(read(&no_template).is_err());
    let huge =
        json!({"kind": "Pod", "metadata": {"name": "x".repeat(300)}, "spec": {"containers": []}});
    assert!(read(&huge).is_err());
}

#[test]
fn totals_summary_sorting_and_placement() {
    let targets = arm64();
    let web = workload(deployment(
        "web",
        3,
        json!([{"image": "multi:1", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]),
        json!([]),
    ));
    let db = workload(deployment(
        "db",
        1,
        json!([{"image": "amd:1", "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}]),
        json!([]),
    ));
    let mut other = deployment(
        "cache",
        2,
        json!([{"image": "lost:1", "resources": {"requests": {"cpu": "1"}}}]),
        json!([]),
    );
    other["metadata"]["namespace"] = json!("ops");
    let cache = workload(other);
    let items = vec![
        Item::new(
            web,
            vec![platforms(&["linux/amd64", "linux/arm64"])],
            &targets,
        ),
        Item::new(db, vec![platforms(&["linux/amd64"])], &targets),
        Item::new(cache, vec![failed("unauthorized")], &targets),
    ];
    let pod = |name: &str, owner_kind: &str, owner: &str, node: &str| Owner {
        kind: "Pod".into(),
        namespace: "team".into(),
        name: name.into(),
        owner_kind: owner_kind.into(),
        owner_name: owner.into(),
        running_on: Some(if node.is_empty() {
            Running::Unscheduled
        } else {
            Running::Node(node.into())
        }),
    };
    let placement = Placement {
        owned: vec![
            Owner {
                kind: "ReplicaSet".into(),
                namespace: "team".into(),
                name: "web-1".into(),
                owner_kind: "Deployment".into(),
                owner_name: "web".into(),
                running_on: None,
            },
            pod("web-1-a", "ReplicaSet", "web-1", "n1"),
            pod("web-1-b", "ReplicaSet", "web-1", "n2"),
            pod("web-1-c", "ReplicaSet", "web-1", ""),
        ],
        nodes: [("n1".to_owned(), "amd64".to_owned())].into(),
    };
    let report = Report::new(targets, items, Some(&placement), Vec::new());
    let names: Vec<&str> = report
        .items
        .iter()
        .map(|i| i.workload.name.as_str())
        .collect();
    assert_eq!(names, ["db", "cache", "web"], "by total CPU: 4, 2, 1.5");
    let web = &report.items[2];
    assert_eq!(web.total.unwrap().cpu.to_string(), "1500m");
    assert_eq!(web.total.unwrap().memory.to_string(), "768Mi");
    let running: Vec<(&str, u64)> = web
        .running_on
        .as_ref()
        .unwrap()
        .iter()
        .map(|(a, n)| (a.as_str(), *n))
        .collect();
    assert_eq!(running, [("amd64", 1), ("unknown", 1), ("unscheduled", 1)]);
    let (_, arm) = &report.summary[0];
    assert_eq!(
        arm.all.workloads,
        Counts {
            ready: 1,
            blocked: 1,
            unknown: 1
        }
    );
    assert_eq!(
        arm.all.movable.cpu.to_string(),
        "1500m",
        "only ready workloads move"
    );
    let blocker = &arm.blocking_images[0];
    assert_eq!(arm.blocking_images.len(), 1);
    assert_eq!(
        (blocker.image.as_str(), blocker.workloads, blocker.replicas),
        ("amd:1", 1, 1)
    );
    assert_eq!(blocker.requests.cpu.to_string(), "4");
    assert_eq!(
        arm.all.replicas,
        Counts {
            ready: 3,
            blocked: 1,
            unknown: 2
        }
    );
    assert_eq!(arm.all.requests.blocked.memory.to_string(), "8Gi");
    assert_eq!(arm.all.requests.unknown.cpu.to_string(), "2");
    assert_eq!(arm.namespaces["ops"].workloads.unknown, 1);
    assert_eq!(report.image_errors.len(), 1);
    assert!(report.any(&[Verdict::Blocked]));
    let json = report.json();
    assert_eq!(json["apiVersion"], API_VERSION);
    assert_eq!(json["kind"], KIND);
    assert_eq!(json["items"][0]["verdicts"]["arm64"], "blocked");
    assert_eq!(json["items"][0]["blocking"]["arm64"], json!(["amd:1"]));
    assert_eq!(
        json["items"][1]["images"][0]["error"]["kind"],
        "unauthorized"
    );
    assert_eq!(
        json["items"][2]["totalRequests"],
        json!({"cpu": "1500m", "memory": "768Mi"})
    );
    assert_eq!(
        json["summary"]["arm64"]["workloads"],
        json!({"ready": 1, "blocked": 1, "unknown": 1})
    );
    assert_eq!(
        json["summary"]["arm64"]["movable"],
        json!({"cpu": "1500m", "memory": "768Mi"})
    );
    assert_eq!(
        json["summary"]["arm64"]["replicas"],
        json!({"ready": 3, "blocked": 1, "unknown": 2})
    );
    assert_eq!(
        json["summary"]["arm64"]["requests"]["blocked"],
        json!({"cpu": "4", "memory": "8Gi"})
    );
    assert_eq!(
        json["summary"]["arm64"]["blockingImages"],
        json!([{"image": "amd:1", "workloads": 1, "replicas": 1, "requests": {"cpu": "4", "memory": "8Gi"}}])
    );
    assert!(json["items"][0].get("upgrades").is_none());
}

#[test]
fn csv_header_matches_rows_and_hostile_strings_are_contained() {
    let mut object = deployment("we,b\"x\n", 1, json!([{"image": "a:1"}]), json!([]));
    object["metadata"]["name"] = json!("we,b\"x\u{1b}[31m|");
    let w = workload(object);
    let report = Report::new(
        arm64(),
        vec![Item::new(w, vec![platforms(&["linux/arm64"])], &arm64())],
        None,
        Vec::new(),
    );
    let csv = report.csv();
    let mut rows = csv.split("\r\n").filter(|r| !r.is_empty());
    let header = rows.next().unwrap();
    assert_eq!(header, "namespace,kind,name,replicas,cpu_request,memory_request,total_cpu,total_memory,arm64,blocking,unknown");
    let row = rows.next().unwrap();
    assert!(row.contains("\"we,b\"\"x\u{1b}[31m|\""), "{row}");
    let plain = workload(deployment("plain", 1, json!([{"image": "a:1"}]), json!([])));
    let plain = Report::new(
        arm64(),
        vec![Item::new(plain, vec![failed("not_found")], &arm64())],
        None,
        Vec::new(),
    );
    let csv = plain.csv();
    let lines: Vec<&str> = csv.split("\r\n").filter(|r| !r.is_empty()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0].matches(',').count(),
        lines[1].matches(',').count(),
        "{csv}"
    );
    let table = report.table();
    assert!(!table.contains('\u{1b}'), "{table}");
    let markdown = report.markdown();
    assert!(markdown.contains("we,b\"x\\\\u{1b}\\[31m\\|"), "{markdown}");
    assert_eq!(markdown.lines().next().unwrap().matches('|').count(), 12);
}

/// The fields of RFC 4180 CSV text (CRLF rows, quoted fields with doubled quotes).
fn csv_fields(csv: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = csv.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\r') if chars.peek() == Some(&'\n') => {
                chars.next();
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    rows
}

/// Workload, namespace and image names a spreadsheet would run or a Markdown viewer would
/// render as HTML are written as text.
#[test]
fn hostile_names_are_text_in_csv_and_markdown() {
    let hostile = [
        "=cmd|' /C calc'!A0",
        "<img src=x onerror=alert(1)>",
        "+SUM(1+1)*cmd|' /C calc'!A0",
        "@SUM(1)",
        "-2+3",
        "\tx",
        "\rx",
    ];
    let items: Vec<Item> = hostile
        .iter()
        .map(|name| {
            let mut object = deployment("x", 1, json!([{"image": name}]), json!([]));
            object["metadata"]["name"] = json!(name);
            object["metadata"]["namespace"] = json!(name);
            Item::new(
                workload(object),
                vec![platforms(&["linux/amd64"])],
                &arm64(),
            )
        })
        .chain(hostile.iter().map(|name| {
            let object = deployment("y", 1, json!([{"image": name}]), json!([]));
            Item::new(workload(object), vec![failed(name)], &arm64())
        }))
        .collect();
    let report = Report::new(arm64(), items, None, Vec::new());
    let csv = report.csv();
    let rows = csv_fields(&csv);
    assert_eq!(rows.len(), 1 + 2 * hostile.len(), "{csv}");
    for row in &rows {
        assert_eq!(row.len(), rows[0].len(), "{row:?}");
        for field in row {
            assert!(
                !field.starts_with(['=', '+', '-', '@', '\t', '\r']),
                "a formula cell: {field:?}"
            );
        }
    }
    // The text is kept, behind the quote.
    assert!(
        rows.iter().flatten().any(|f| f == "'=cmd|' /C calc'!A0"),
        "{csv}"
    );
    let markdown = report.markdown();
    assert!(!markdown.contains('<'), "{markdown}");
    assert!(
        markdown.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{markdown}"
    );
    let columns = report.columns().len();
    for line in markdown.lines().take_while(|l| l.starts_with('|')) {
        let unescaped = line.replace("\\\\", "").replace("\\|", "");
        assert_eq!(unescaped.matches('|').count(), columns + 1, "{line}");
    }
}

/// Keeps what is written, and the largest single write.
#[derive(Default)]
struct Recorder {
    bytes: Vec<u8>,
    largest: usize,
}

impl std::io::Write for Recorder {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.largest = self.largest.max(buf.len());
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The JSON is written part by part (never a tree or a string of the whole document), with the
/// bytes of the document as a tree renders it: keys sorted at every level.
#[test]
fn json_is_streamed_with_the_bytes_of_the_document() {
    let targets = vec!["arm64".to_owned(), "amd64".to_owned()];
    let items: Vec<Item> = (0..2000u64)
        .map(|i| {
            let containers = json!([{"image": format!("img-{}:1", i % 7)}, {"image": "gone:1"}]);
            let w = workload(deployment(
                &format!("app-{i}"),
                1 + i % 3,
                containers,
                json!([]),
            ));
            let first = if i % 2 == 0 {
                platforms(&["linux/amd64", "linux/arm64/v8"])
            } else {
                platforms(&["linux/amd64"])
            };
            Item::new(w, vec![first, failed("not_found")], &targets)
        })
        .collect();
    let errors = vec![SourceError {
        source: "Deployment team/\"odd\"".to_owned(),
        message: "not valid\n".to_owned(),
    }];
    let report = Report::new(targets, items, Some(&Placement::default()), errors);
    let mut out = Recorder::default();
    report.write_json(&mut out).unwrap();
    let tree = format!(
        "{}\n",
        serde_json::to_string_pretty(&report.json()).unwrap()
    );
    assert!(out.bytes.len() > 1 << 20, "{} bytes", out.bytes.len());
    assert!(out.largest <= 256, "a write of {} bytes", out.largest);
    assert!(
        String::from_utf8(out.bytes).unwrap() == tree,
        "not the tree's bytes"
    );
    let json = report.json();
    assert_eq!(json["items"][0]["runningOn"], json!({}));
    assert_eq!(json["items"][0]["images"][1]["platforms"], Value::Null);
    assert_eq!(json["errors"]["sources"][0]["message"], "not valid\n");
}

/// Every `data-figure` of an HTML page with its `value`, in order.
fn html_figures(html: &str) -> Vec<(String, String)> {
    html.split("<data data-figure=\"")
        .skip(1)
        .filter_map(|rest| {
            let (figure, rest) = rest.split_once("\" value=\"")?;
            let (value, _) = rest.split_once('"')?;
            Some((figure.to_owned(), value.to_owned()))
        })
        .collect()
}

/// The page's figures are the JSON report's, and hostile names are text.
#[test]
fn the_html_page_carries_the_json_figures_and_escapes_every_string() {
    let targets = vec!["arm64".to_owned(), "amd64".to_owned()];
    let mut hostile = deployment(
        "x",
        2,
        json!([{"image": "<script>alert(1)</script>:1", "resources": {"requests": {"cpu": "250m"}}}]),
        json!([]),
    );
    hostile["metadata"]["name"] = json!("<img src=x onerror=alert(1)>");
    hostile["metadata"]["namespace"] = json!("\"><svg onload=alert(2)>");
    let items = vec![
        Item::new(
            workload(hostile),
            vec![platforms(&["linux/amd64"])],
            &targets,
        ),
        Item::new(
            workload(deployment(
                "web",
                3,
                json!([{"image": "multi:1", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]),
                json!([]),
            )),
            vec![platforms(&["linux/amd64", "linux/arm64"])],
            &targets,
        ),
        Item::new(
            workload(deployment(
                "gone",
                1,
                json!([{"image": "gone:1"}]),
                json!([]),
            )),
            vec![failed("not_found")],
            &targets,
        ),
    ];
    let report = Report::new(targets, items, None, Vec::new());
    let meta = render::html::Meta {
        generated: "2026-11-28T10:00:00Z".into(),
        source: "context <kind-dev>".into(),
        command: "noe report -o html --name='<b>'".into(),
    };
    let html = report.html_string(&meta);
    for needle in [
        "<script>alert",
        "<img src",
        "<svg onload",
        "<b>",
        "<kind-dev>",
    ] {
        assert!(!html.contains(needle), "{needle} in the page");
    }
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
    assert_eq!(
        html.matches("<script>").count(),
        1,
        "one script: the page's own"
    );
    let json = report.json();
    let figures = html_figures(&html);
    assert!(figures.len() >= 2 * 4 * 3, "{figures:?}");
    for (figure, value) in &figures {
        let mut at = &json["summary"];
        for key in figure.split('.') {
            at = match key.parse::<usize>() {
                Ok(i) => &at[i],
                Err(_) => &at[key],
            };
        }
        let want = match at {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        assert_eq!(&want, value, "{figure}");
    }
    assert!(figures.contains(&("arm64.workloads.blocked".into(), "1".into())));
    assert!(figures.contains(&("arm64.requests.ready.cpu".into(), "3".into())));
    assert!(figures.contains(&("amd64.replicas.ready".into(), "5".into())));
}

/// A learned correction is shown by every rendering: a `learned` column (CSV, table,
/// Markdown), a summary line, and an HTML section naming its evidence and the workloads it
/// concerns; its evidence (from a pod status) is text everywhere.
#[test]
fn learned_corrections_are_shown_in_csv_markdown_and_html() {
    let evidence = "pod shop/<img src=x onerror=alert(1)> on node arm-1 at 2026-11-28T09:00:00Z: exec /app: exec format error | =cmd";
    let correction = crate::truth::Correction::new(
        "sha256:1111111111111111111111111111111111111111111111111111111111111111",
        Platform::new("linux", "arm64", None),
        crate::truth::Source::ExecFormatError,
        evidence,
    );
    let items: Vec<Item> = ["web", "api", "plain"]
        .iter()
        .map(|name| {
            let image = if *name == "plain" { "other:1" } else { "app:1" };
            let object = deployment(name, 1, json!([{"image": image}]), json!([]));
            let mut item = Item::new(
                workload(object),
                vec![platforms(&["linux/amd64"])],
                &arm64(),
            );
            if *name != "plain" {
                item.images[0].corrections = vec![correction.clone()];
                item.images[0].learned = vec![correction.clone()];
            }
            item
        })
        .collect();
    let report = Report::new(arm64(), items, None, Vec::new());

    let csv = report.csv();
    let rows = csv_fields(&csv);
    let at = rows[0]
        .iter()
        .position(|c| c == "learned")
        .expect("a learned column");
    assert_eq!(at, rows[0].len() - 1, "after unknown: {:?}", rows[0]);
    let cells: Vec<&str> = rows[1..].iter().map(|row| row[at].as_str()).collect();
    let words = format!("app:1: linux/arm64 (exec-format-error: {evidence})");
    assert_eq!(cells.iter().filter(|c| **c == words).count(), 2, "{csv}");
    assert!(cells.contains(&""), "the workload without one: {csv}");

    let markdown = report.markdown();
    assert!(!markdown.contains("<img"), "{markdown}");
    assert!(markdown.contains("| LEARNED |"), "{markdown}");
    assert!(
        markdown.contains(
            "- 1 platforms left out as learned on the cluster's nodes (the learned store):"
        ),
        "{markdown}"
    );
    assert!(markdown.contains("(2 workloads)"), "{markdown}");
    let columns = report.columns().len();
    for line in markdown.lines().take_while(|l| l.starts_with('|')) {
        let unescaped = line.replace("\\\\", "").replace("\\|", "");
        assert_eq!(unescaped.matches('|').count(), columns + 1, "{line}");
    }

    let html = report.html_string(&render::html::Meta::default());
    assert!(!html.contains("<img"), "the evidence is text");
    let section = html
        .split("<section id=\"learned\"")
        .nth(1)
        .and_then(|rest| rest.split("</section>").next())
        .expect("a learned section");
    assert!(section.contains("1 platform is left out"), "{section}");
    assert!(section.contains("<code>app:1</code>"), "{section}");
    assert!(
        section.contains("<td>linux/arm64</td><td>exec-format-error</td>"),
        "{section}"
    );
    assert!(
        section.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{section}"
    );
    assert!(section.contains("team/web"), "{section}");
    assert!(section.contains("team/api"), "{section}");
    assert!(!section.contains("team/plain"), "{section}");

    // Nothing learned: no column, no section.
    let plain = Report::new(
        arm64(),
        vec![Item::new(
            workload(deployment("plain", 1, json!([{"image": "a:1"}]), json!([]))),
            vec![platforms(&["linux/arm64"])],
            &arm64(),
        )],
        None,
        Vec::new(),
    );
    assert!(!plain.csv().contains("learned"));
    assert!(!plain
        .html_string(&render::html::Meta::default())
        .contains("id=\"learned\""));
}
