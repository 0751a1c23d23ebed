//! Three server processes on one Postgres database behind a round-robin TCP balancer, the way
//! Kubernetes runs them (issue 16): started at the same instant on an empty database, a
//! session made on one replica used on the others, and agents uploading through the balancer
//! while one replica is killed (SIGKILL) in the middle of an upload. Every run is stored
//! exactly once, whole.
//!
//! Postgres only: the database comes from `HEADROOM_TEST_POSTGRES_URL` (CI always sets it;
//! `.ci/run` refuses to run without Postgres). Without it the test says it is skipped.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;
use common::{agent, free_addr, server_bin, text};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const REPLICAS: usize = 3;
const AGENTS: usize = 6;
const RUNS_PER_AGENT: usize = 2;

/// A database of its own in the test Postgres, dropped at the end (`.ci/run` drops any an
/// interrupted run left: they share the `headroom_t_` prefix).
struct Database {
    admin_url: String,
    name: String,
    url: String,
}

impl Database {
    fn create(admin_url: &str) -> Database {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let name = format!("headroom_t_replicas_{}_{nanos}", std::process::id());
        let (base, _) = admin_url.rsplit_once('/').expect("postgres://host/db");
        let database = Database { admin_url: admin_url.to_string(), url: format!("{base}/{name}"), name };
        database.psql_admin(&format!("CREATE DATABASE {}", database.name));
        database
    }

    fn psql_admin(&self, sql: &str) -> String {
        psql(&self.admin_url, sql)
    }

    fn query(&self, sql: &str) -> String {
        psql(&self.url, sql)
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .arg(&self.admin_url)
            .args(["-Atqc", &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name)])
            .output();
    }
}

fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql").arg(url).args(["-Atqc", sql]).output().expect("psql runs (postgresql-client)");
    assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `headroom-server admin ARGS` against the shared database; the secret it printed last.
fn admin(url: &str, args: &[&str]) -> String {
    let out = Command::new(server_bin())
        .arg("--database-url")
        .arg(url)
        .arg("admin")
        .args(args)
        .stdin(Stdio::piped())
        .output()
        .expect("headroom-server runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "admin {args:?}: {text}{}", String::from_utf8_lossy(&out.stderr));
    text.split_whitespace().last().expect("a secret").to_string()
}

/// One `headroom-server serve` process.
struct Replica {
    addr: String,
    child: Option<Child>,
    _data_dir: tempfile::TempDir,
}

impl Replica {
    fn spawn(url: &str) -> Replica {
        let data_dir = tempfile::tempdir().unwrap();
        let addr = free_addr();
        let child = Command::new(server_bin())
            .args(["serve", "--listen", &addr, "--site-root", "/nonexistent-site", "--database-url", url])
            .env("HEADROOM_DATA_DIR", data_dir.path())
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .spawn()
            .expect("headroom-server starts");
        Replica { addr, child: Some(child), _data_dir: data_dir }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// SIGTERM, and the exit status (0: it shut down cleanly).
    async fn stop(mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
        tokio::task::spawn_blocking(move || child.wait().unwrap()).await.unwrap()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A layer-4 load balancer: each connection goes to the next replica in turn, skipping one that
/// refuses the connection (a dead pod), bytes copied both ways. On the `kill_at`-th connection it
/// SIGKILLs the replica it chose as soon as the first bytes of the request have reached it, so
/// that replica dies with an upload in flight.
struct Balancer {
    addr: String,
    connections: Arc<AtomicUsize>,
    killed: Arc<AtomicUsize>,
}

impl Balancer {
    async fn start(upstreams: Vec<(String, u32)>, kill_at: usize) -> Balancer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let connections = Arc::new(AtomicUsize::new(0));
        let killed = Arc::new(AtomicUsize::new(usize::MAX));
        let (count, victim) = (connections.clone(), killed.clone());
        tokio::spawn(async move {
            let upstreams = Arc::new(upstreams);
            loop {
                let Ok((client, _)) = listener.accept().await else { return };
                let n = count.fetch_add(1, Ordering::SeqCst) + 1;
                let (upstreams, victim) = (upstreams.clone(), victim.clone());
                tokio::spawn(async move {
                    for step in 0..upstreams.len() {
                        let index = (n + step) % upstreams.len();
                        let Ok(server) = TcpStream::connect(&upstreams[index].0).await else { continue };
                        let kill = (n == kill_at).then_some((index, upstreams[index].1, victim));
                        relay(client, server, kill).await;
                        return;
                    }
                });
            }
        });
        Balancer { addr, connections, killed }
    }

    /// The index of the replica killed, once it was.
    fn killed(&self) -> Option<usize> {
        Some(self.killed.load(Ordering::SeqCst)).filter(|&i| i != usize::MAX)
    }
}

async fn relay(mut client: TcpStream, mut server: TcpStream, kill: Option<(usize, u32, Arc<AtomicUsize>)>) {
    if let Some((index, pid, victim)) = kill {
        let mut first = vec![0u8; 64 << 10];
        let Ok(n) = client.read(&mut first).await else { return };
        if n == 0 || server.write_all(&first[..n]).await.is_err() {
            return;
        }
        // Let the replica read what it was sent, then kill it mid-request.
        tokio::time::sleep(Duration::from_millis(20)).await;
        Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
        victim.store(index, Ordering::SeqCst);
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
}

async fn ready(http: &reqwest::Client, addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !http.get(format!("http://{addr}/readyz")).send().await.is_ok_and(|r| r.status().is_success()) {
        assert!(Instant::now() < deadline, "the replica at {addr} is not ready within 120 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The spooled runs: run id → number of measurements in the file.
fn spooled(spool: &Path) -> BTreeMap<String, usize> {
    let files = std::fs::read_dir(spool).unwrap().map(|e| e.unwrap().path());
    files
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p: PathBuf| {
            let run: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            let id = run["run_id"].as_str().expect("run_id").to_string();
            (id, run["measurements"].as_array().expect("measurements").len())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_on_one_postgres_store_every_run_once_when_one_dies_mid_upload() {
    let Some(admin_url) = std::env::var("HEADROOM_TEST_POSTGRES_URL").ok().filter(|u| !u.is_empty()) else {
        eprintln!("skipped: HEADROOM_TEST_POSTGRES_URL is not set (this test needs Postgres)");
        return;
    };
    let db = Database::create(&admin_url);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    // Three processes at the same instant on an empty database: each migrates or waits for the
    // one that does, and the price catalog is seeded once.
    let replicas: Vec<Replica> = (0..REPLICAS).map(|_| Replica::spawn(&db.url)).collect();
    for replica in &replicas {
        ready(&http, &replica.addr).await;
    }
    let migrations = db.query("SELECT count(*) || ' ' || bool_and(success) FROM _sqlx_migrations");
    let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations/postgres")).unwrap().count();
    assert_eq!(migrations, format!("{files} true"), "every migration applied once, successfully");
    assert_eq!(db.query("SELECT count(*) FROM catalog_versions"), "1", "the default catalog seeded once");

    // A session made on one replica is honoured by the others, and signing out on one ends it on all.
    let password = "correct horse battery staple";
    let mut create = Command::new(server_bin())
        .args([
            "--database-url",
            &db.url,
            "admin",
            "create-user",
            "--name",
            "sre",
            "--role",
            "admin",
            "--password-stdin",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut create.stdin.take().unwrap(), password.as_bytes()).unwrap();
    assert!(create.wait().unwrap().success(), "create-user");
    let signed_in = http
        .post(format!("http://{}/login", replicas[0].addr))
        .form(&[("name", "sre"), ("password", password)])
        .send()
        .await
        .unwrap();
    let cookie = signed_in.headers().get("set-cookie").expect("signed in on replica 0").to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_string();
    let me = |addr: &str| http.get(format!("http://{addr}/api/v1/me")).header("cookie", &cookie).send();
    for replica in &replicas {
        assert_eq!(me(&replica.addr).await.unwrap().status(), 200, "the session works on {}", replica.addr);
    }
    let out = http.post(format!("http://{}/logout", replicas[2].addr)).header("cookie", &cookie).send().await;
    assert!(out.unwrap().status().is_redirection(), "signed out on replica 2");
    assert_eq!(me(&replicas[0].addr).await.unwrap().status(), 401, "the session ended everywhere");

    // Agents' runs, measured here and spooled, then uploaded all at once through the balancer;
    // the fourth connection's replica is killed with that upload in flight.
    let spools: Vec<tempfile::TempDir> = (0..AGENTS).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut made = BTreeMap::new();
    for spool in &spools {
        for _ in 0..RUNS_PER_AGENT {
            let out = agent(&["run", "system", "--quick"], spool.path(), None).await;
            assert!(out.status.success(), "{}", text(&out));
        }
        let runs = spooled(spool.path());
        assert_eq!(runs.len(), RUNS_PER_AGENT);
        made.extend(runs);
    }
    let token = admin(&db.url, &["create-agent-token", "--name", "fleet"]);
    let upstreams = replicas.iter().map(|r| (r.addr.clone(), r.pid())).collect();
    let balancer = Balancer::start(upstreams, 4).await;
    let url = format!("http://{}", balancer.addr);
    let mut uploads = Vec::new();
    for spool in &spools {
        let mut cmd = Command::cargo_bin("measurements-agent").unwrap();
        cmd.args(["upload", "--server", &url, "--token", &token, "--spool"]).arg(spool.path());
        uploads.push(
            cmd.env_remove("HEADROOM_SERVER")
                .env_remove("HEADROOM_TOKEN")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
    }
    let mut outs = Vec::new();
    for upload in uploads {
        outs.push(tokio::task::spawn_blocking(move || upload.wait_with_output().unwrap()).await.unwrap());
    }
    let killed = balancer.killed().expect("a replica was killed mid-upload");
    eprintln!("replica {killed} killed; {} connections", balancer.connections.load(Ordering::SeqCst));
    assert!(balancer.connections.load(Ordering::SeqCst) >= AGENTS, "every agent went through the balancer");

    // What the killed replica did not acknowledge stays spooled; the next upload (the agent's
    // next scheduled run) delivers it through the surviving replicas.
    for (spool, out) in spools.iter().zip(&outs) {
        eprintln!("agent {}: {}", out.status, text(out).trim().replace('\n', " | "));
        if !out.status.success() {
            assert_eq!(out.status.code(), Some(3), "only 'runs remain in the spool' is acceptable: {}", text(out));
            let again = agent(&["upload"], spool.path(), Some((&url, &token))).await;
            assert!(again.status.success(), "{}", text(&again));
        }
        assert!(spooled(spool.path()).is_empty(), "spool {} drained", spool.path().display());
    }

    // Exactly once, whole: every run made is stored once with every measurement it carried.
    let stored: BTreeMap<String, usize> = db
        .query("SELECT r.id || ' ' || count(m.*) FROM runs r LEFT JOIN measurements m ON m.run_id = r.id GROUP BY r.id")
        .lines()
        .map(|line| {
            let (id, count) = line.split_once(' ').unwrap();
            (id.to_string(), count.parse().unwrap())
        })
        .collect();
    assert_eq!(stored, made, "every run stored exactly once with all its measurements");
    assert_eq!(made.len(), AGENTS * RUNS_PER_AGENT, "distinct run ids");

    // The survivors shut down cleanly; the killed one is gone.
    for (index, replica) in replicas.into_iter().enumerate() {
        if index == killed {
            continue;
        }
        let status = replica.stop().await;
        assert!(status.success(), "replica {index} exits cleanly on SIGTERM: {status}");
    }
}
