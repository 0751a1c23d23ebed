//! The manifests in `deploy/kubernetes/`: validated against the API schemas of two Kubernetes
//! versions by `kubernetes-validate` (strict: an unknown field fails), and checked against
//! this build's binaries where the schemas cannot see: every container's arguments parse,
//! every variable it sets is one the binary reads, every Secret key it takes exists, and the
//! probes' paths answer 200 on the real server.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

mod common;

use common::{Server, server_bin, text};
use serde_json::Value;

/// The oldest and newest minor versions the pinned schemas carry that are still supported.
const VERSIONS: [&str; 2] = ["1.30.0", "1.34.0"];

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes")
}

fn manifests() -> Vec<PathBuf> {
    let dir = manifests_dir();
    let mut files: Vec<PathBuf> = ["", "optional"]
        .iter()
        .flat_map(|sub| std::fs::read_dir(dir.join(sub)).unwrap().map(|e| e.unwrap().path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml") && !p.ends_with("kustomization.yaml"))
        .collect();
    files.sort();
    files
}

/// kubernetes-validate's virtual environment, installed on first use (never skipped).
fn venv() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| common::tool_venv("kubernetes-validate"))
}

fn validate(version: &str, files: &[PathBuf]) -> std::process::Output {
    Command::new(venv().join("bin/kubernetes-validate"))
        .args(["--strict", "--kubernetes-version", version])
        .args(files)
        .output()
        .expect("kubernetes-validate runs")
}

/// Every document of every manifest, as JSON (PyYAML from the same environment reads them).
fn documents() -> Vec<Value> {
    let out = Command::new(venv().join("bin/python"))
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps([d for f in sys.argv[1:] for d in yaml.safe_load_all(open(f))]))",
        ])
        .args(manifests())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn manifests_pass_strict_schema_validation_on_two_kubernetes_versions() {
    let files = manifests();
    assert!(files.len() >= 8, "{files:?}");
    for version in VERSIONS {
        let out = validate(version, &files);
        assert!(out.status.success(), "Kubernetes {version}: {}", text(&out));
        let passed = text(&out).lines().filter(|l| l.contains(" passed for resource ")).count();
        assert_eq!(passed, documents().len(), "every resource checked: {}", text(&out));
    }
    // The check bites: a misspelt field and a wrong type both fail.
    let dir = tempfile::tempdir().unwrap();
    let server = std::fs::read_to_string(manifests_dir().join("server.yaml")).unwrap();
    for (from, to, error) in [
        ("  replicas: 2", "  replica: 2", "'replica' was unexpected"),
        ("containerPort: 3000", "containerPort: \"3000\"", "is not of type 'integer'"),
    ] {
        let broken = dir.path().join("server.yaml");
        std::fs::write(&broken, server.replacen(from, to, 1)).unwrap();
        let out = validate(VERSIONS[1], &[broken]);
        assert!(!out.status.success() && text(&out).contains(error), "{from} → {to}: {}", text(&out));
    }
    // The kustomization names files that exist.
    let kustomization = std::fs::read_to_string(manifests_dir().join("kustomization.yaml")).unwrap();
    for line in kustomization.lines().filter_map(|l| l.trim().strip_prefix("- ")).filter(|l| l.ends_with(".yaml")) {
        assert!(manifests_dir().join(line).exists(), "kustomization lists {line}");
    }
}

/// Each pod template in the documents, with its kind and name, and its namespace.
fn pod_specs(documents: &[Value]) -> Vec<(String, &str, &Value)> {
    documents
        .iter()
        .filter_map(|d| {
            let kind = d["kind"].as_str()?;
            let spec = match kind {
                "Deployment" | "DaemonSet" => &d["spec"]["template"]["spec"],
                "CronJob" => &d["spec"]["jobTemplate"]["spec"]["template"]["spec"],
                _ => return None,
            };
            let namespace = d["metadata"]["namespace"].as_str().expect("every namespaced resource names its namespace");
            Some((format!("{kind}/{}", d["metadata"]["name"].as_str().unwrap()), namespace, spec))
        })
        .collect()
}

fn strings(value: &Value) -> Vec<&str> {
    value.as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_match_the_binaries_and_the_probes_answer_on_the_real_server() {
    let documents = documents();
    // (namespace, Secret, key) of the example Secrets.
    let secret_keys: BTreeSet<(&str, &str, &str)> = documents
        .iter()
        .filter(|d| d["kind"] == "Secret")
        .flat_map(|d| {
            let (namespace, name) =
                (d["metadata"]["namespace"].as_str().unwrap(), d["metadata"]["name"].as_str().unwrap());
            d["stringData"].as_object().unwrap().keys().map(move |key| (namespace, name, key.as_str()))
        })
        .collect();
    // The pod security level each namespace enforces.
    let levels: std::collections::BTreeMap<&str, &str> = documents
        .iter()
        .filter(|d| d["kind"] == "Namespace")
        .map(|d| {
            let labels = &d["metadata"]["labels"];
            (d["metadata"]["name"].as_str().unwrap(), labels["pod-security.kubernetes.io/enforce"].as_str().unwrap())
        })
        .collect();
    for d in documents.iter().filter(|d| d["kind"] != "Namespace") {
        let namespace = d["metadata"]["namespace"].as_str().unwrap_or_else(|| panic!("{d} names no namespace"));
        assert!(levels.contains_key(namespace), "{namespace} is not created by namespace.yaml");
    }
    let agent = server_bin().parent().unwrap().join("measurements-agent");
    let pods = pod_specs(&documents);
    assert_eq!(
        pods.len(),
        4,
        "server, retention CronJob, agent DaemonSet, agent CronJob: {:?}",
        pods.iter().map(|p| &p.0).collect::<Vec<_>>()
    );

    let db = tempfile::tempdir().unwrap();
    let server = Server::start(db.path(), "127.0.0.1:0").await;
    for (name, namespace, pod) in &pods {
        assert_eq!(pod["automountServiceAccountToken"], false, "{name} needs no API access");
        // Pod security admission would refuse a hostPath anywhere but a privileged namespace,
        // and the server's namespace is held to the restricted level.
        let host_path = pod["volumes"].as_array().into_iter().flatten().any(|v| v.get("hostPath").is_some());
        let wanted = if host_path { "privileged" } else { "restricted" };
        assert_eq!(levels[namespace], wanted, "{name} in {namespace}");
        for container in pod["containers"].as_array().unwrap() {
            let image = container["image"].as_str().unwrap();
            let binary = if image.contains("headroom-server") { server_bin() } else { agent.clone() };
            let args = strings(&container["args"]);
            // Flags and values parse (clap reads them in order, so a bad one fails before
            // --help is reached).
            let out = Command::new(&binary).args(&args).arg("--help").output().unwrap();
            assert!(out.status.success(), "{name}: {args:?}: {}", text(&out));
            let help = text(&out);
            for env in container["env"].as_array().unwrap() {
                let var = env["name"].as_str().unwrap();
                let read_directly = ["HEADROOM_CACHE", "HEADROOM_NODE_NAME"];
                assert!(
                    help.contains(&format!("[env: {var}")) || read_directly.contains(&var),
                    "{name} sets {var}, which {} does not read",
                    binary.display()
                );
                let from = &env["valueFrom"]["secretKeyRef"];
                if let (Some(secret), Some(key)) = (from["name"].as_str(), from["key"].as_str()) {
                    assert!(
                        secret_keys.contains(&(*namespace, secret, key)),
                        "{name} takes {key} from Secret {secret} in {namespace}; the examples have {secret_keys:?}"
                    );
                }
            }
            let security = &container["securityContext"];
            assert_eq!(security["allowPrivilegeEscalation"], false, "{name}");
            assert_eq!(security["readOnlyRootFilesystem"], true, "{name}");
            assert_eq!(strings(&security["capabilities"]["drop"]), ["ALL"], "{name}");
            // Probes name a declared port; the server's answer 200 on the real server.
            let ports: BTreeSet<&str> =
                container["ports"].as_array().into_iter().flatten().filter_map(|p| p["name"].as_str()).collect();
            for probe in ["readinessProbe", "livenessProbe"] {
                let get = &container[probe]["httpGet"];
                if get.is_null() {
                    continue;
                }
                assert!(ports.contains(get["port"].as_str().unwrap()), "{name} {probe} port");
                if binary == server_bin() {
                    let url = format!("{}{}", server.url, get["path"].as_str().unwrap());
                    let status = reqwest::get(&url).await.unwrap().status();
                    assert_eq!(status, 200, "{name} {probe}: GET {url}");
                }
            }
        }
    }
    server.stop().await;
}
