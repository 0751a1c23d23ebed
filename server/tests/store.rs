//! The store's behaviour, on every backend under test.

mod common;

use common::{databases, fleet_run, sample_run};
use headroom_server::auth::{self, Role};
use headroom_server::store::{RunFilter, Store};
use model::{RunStatus, Suite};

async fn each_backend<F, Fut>(test: F)
where
    F: Fn(Store, &'static str) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for db in databases().await {
        eprintln!("store test on {}", db.backend);
        let store = Store::connect(&db.url).await.expect("connect");
        test(store.clone(), db.backend).await;
        store.close().await;
        db.drop_database().await;
    }
}

async fn agent(store: &Store) -> String {
    store.upsert_agent("agent-1", &auth::hash_token("secret-1")).await.expect("agent")
}

#[tokio::test]
async fn a_run_reads_back_exactly_as_uploaded() {
    each_backend(|store, backend| async move {
        let agent_id = agent(&store).await;
        let run = sample_run("node-a");
        let outcome = store.insert_run(&agent_id, &run).await.unwrap();
        assert!(!outcome.duplicate, "{backend}");
        assert_eq!(outcome.measurements, 5);
        let detail = store.get_run(run.run_id).await.unwrap().expect("stored run");
        assert_eq!(detail.measurements, run.measurements, "{backend}: measurements differ after the round trip");
        assert_eq!(detail.run.suites, vec![Suite::System, Suite::Transport, Suite::Transfer]);
        assert_eq!(detail.run.status, RunStatus::Ok);
        assert_eq!(detail.run.agent_name, "agent-1");
        assert_eq!(detail.run.hostname, "node-a");
    })
    .await;
}

/// Text as a hostile or unlucky agent may send it reads back byte for byte: on Postgres the
/// measurements go through `COPY`'s text format, where a tab, a line break, a backslash or a
/// literal `\N` would otherwise split a row or become NULL.
#[tokio::test]
async fn text_that_copy_would_misread_reads_back_exactly() {
    each_backend(|store, backend| async move {
        let agent_id = agent(&store).await;
        let mut run = sample_run("node-a");
        let tricky = [
            "a\tb",
            "line\nbreak\r\n",
            "back\\slash",
            "\\N",
            "\\.",
            "</textarea><script>",
            "=HYPERLINK(\"x\")",
            "µs ✓",
        ];
        for (m, text) in run.measurements.iter_mut().zip(tricky.iter().cycle()) {
            m.case = format!("case {text}");
            m.parameters.insert(format!("k{text}"), text.to_string());
            m.reason = Some(text.to_string());
            m.floor = Some(model::Floor { name: text.to_string(), value: -0.0 });
        }
        run.measurements[0].reason = Some("\\N".into());
        run.measurements[1].reason = None;
        store.insert_run(&agent_id, &run).await.unwrap();
        let detail = store.get_run(run.run_id).await.unwrap().expect("stored run");
        assert_eq!(detail.measurements, run.measurements, "{backend}");
        assert_eq!(detail.measurements[0].reason.as_deref(), Some("\\N"), "{backend}: text, not NULL");
        // COPY's text form keeps the sign of zero (SQLite stores a whole REAL as an integer and
        // gives back +0.0, as it did before COPY).
        if backend == "postgres" {
            let floor = detail.measurements[0].floor.as_ref().unwrap().value;
            assert_eq!(floor.to_bits(), (-0.0f64).to_bits(), "{backend}: the sign of zero");
        }
    })
    .await;
}

#[tokio::test]
async fn the_same_run_id_is_stored_once() {
    each_backend(|store, backend| async move {
        let agent_id = agent(&store).await;
        let run = sample_run("node-a");
        store.insert_run(&agent_id, &run).await.unwrap();
        let mut again = run.clone();
        again.measurements.truncate(1);
        let second = store.insert_run(&agent_id, &again).await.unwrap();
        assert!(second.duplicate, "{backend}");
        assert_eq!(second.measurements, 5, "the stored run is reported, not the resent one");
        let detail = store.get_run(run.run_id).await.unwrap().unwrap();
        assert_eq!(detail.measurements.len(), 5);
        let runs = store.list_runs(&RunFilter { limit: 10, ..Default::default() }).await.unwrap();
        assert_eq!(runs.len(), 1);
        let nodes = store.list_nodes().await.unwrap();
        assert_eq!(nodes[0].run_count, 1, "{backend}: the run sent twice is counted once");
    })
    .await;
}

#[tokio::test]
async fn a_failed_insert_leaves_nothing_behind() {
    each_backend(|store, backend| async move {
        // An agent id that does not exist violates the runs → agents foreign key after the
        // node was written in the same transaction: the node must be rolled back too.
        let err = store.insert_run("no-such-agent", &sample_run("node-x")).await;
        assert!(err.is_err(), "{backend}: insert with an unknown agent must fail");
        assert!(store.list_nodes().await.unwrap().is_empty(), "{backend}: node left behind");
        assert!(store.list_runs(&RunFilter { limit: 10, ..Default::default() }).await.unwrap().is_empty());
    })
    .await;
}

#[tokio::test]
async fn nodes_show_the_largest_memcpy_of_their_latest_system_run() {
    each_backend(|store, backend| async move {
        let agent_id = agent(&store).await;
        let mut older = sample_run("node-a");
        older.started_at_ms -= 60_000;
        older.measurements[1].stats = Some(common::stats(5e9));
        store.insert_run(&agent_id, &older).await.unwrap();
        store.insert_run(&agent_id, &sample_run("node-a")).await.unwrap();
        store.insert_run(&agent_id, &sample_run("node-b")).await.unwrap();
        let nodes = store.list_nodes().await.unwrap();
        assert_eq!(nodes.len(), 2, "{backend}");
        let a = nodes.iter().find(|n| n.hostname == "node-a").unwrap();
        assert_eq!(a.run_count, 2);
        // 256 MiB is the largest single-thread buffer; the newer run measured 12 GB/s there.
        assert_eq!(a.memcpy_bytes_per_second, Some(12e9), "{backend}");
        // An all-core case outranks any single-thread buffer: it is the node's bandwidth.
        let mut all_cores = sample_run("node-c");
        let mut parallel = all_cores.measurements[0].clone();
        parallel.parameters = std::collections::BTreeMap::from([
            ("bytes".to_string(), (64u64 << 20).to_string()),
            ("threads".to_string(), "8".to_string()),
        ]);
        parallel.stats = Some(common::stats(30e9));
        all_cores.measurements.push(parallel);
        store.insert_run(&agent_id, &all_cores).await.unwrap();
        let nodes = store.list_nodes().await.unwrap();
        let c = nodes.iter().find(|n| n.hostname == "node-c").unwrap();
        assert_eq!(c.memcpy_bytes_per_second, Some(30e9), "{backend}");
        assert_eq!(a.hourly_usd, Some(0.357));
        assert_eq!(a.memory_bytes, 32 << 30);
    })
    .await;
}

#[tokio::test]
async fn runs_filter_by_node_suite_and_time_and_page_newest_first() {
    each_backend(|store, backend| async move {
        let agent_id = agent(&store).await;
        for i in 0..5 {
            let mut run = sample_run(if i % 2 == 0 { "node-a" } else { "node-b" });
            run.started_at_ms += i * 1000;
            if i == 4 {
                run.measurements.retain(|m| m.suite == Suite::Transport);
            }
            store.insert_run(&agent_id, &run).await.unwrap();
        }
        let all = store.list_runs(&RunFilter { limit: 100, ..Default::default() }).await.unwrap();
        assert_eq!(all.len(), 5, "{backend}");
        assert!(all.windows(2).all(|w| w[0].started_at_ms >= w[1].started_at_ms), "newest first");
        let node_a = RunFilter { node: Some("id-node-a".into()), limit: 100, ..Default::default() };
        assert_eq!(store.list_runs(&node_a).await.unwrap().len(), 3);
        let system = RunFilter { suite: Some(Suite::System), limit: 100, ..Default::default() };
        assert_eq!(store.list_runs(&system).await.unwrap().len(), 4, "{backend}: the fifth run has no system suite");
        let page = RunFilter { limit: 2, ..Default::default() };
        let first = store.list_runs(&page).await.unwrap();
        let next = RunFilter { limit: 2, before_ms: Some(first[1].started_at_ms), ..Default::default() };
        let second = store.list_runs(&next).await.unwrap();
        assert_eq!(second.len(), 2);
        assert!(second[0].started_at_ms < first[1].started_at_ms);
    })
    .await;
}

#[tokio::test]
async fn people_sessions_and_tokens() {
    each_backend(|store, backend| async move {
        let hash = auth::hash_password("s3cret-enough").unwrap();
        let id = store.create_user("ana", Role::Finance, &hash).await.unwrap();
        let dup = store.create_user("ana", Role::Viewer, &hash).await.unwrap_err();
        assert!(dup.to_string().contains("already exists"), "{backend}: {dup}");
        let user = store.user_by_name("ana").await.unwrap().unwrap();
        assert_eq!(user.role(), Role::Finance);
        assert!(auth::verify_password("s3cret-enough", &user.password_hash));
        assert!(!auth::verify_password("wrong", &user.password_hash));

        store.create_session(&id, "session-hash").await.unwrap();
        assert_eq!(store.user_by_session("session-hash").await.unwrap().unwrap().name, "ana");
        store.delete_session("session-hash").await.unwrap();
        assert!(store.user_by_session("session-hash").await.unwrap().is_none());

        store.create_api_token(&id, "api-hash", None).await.unwrap();
        assert_eq!(store.user_by_api_token("api-hash").await.unwrap().unwrap().id, id);

        let first = store.upsert_agent("gpu-7", "old").await.unwrap();
        let second = store.upsert_agent("gpu-7", "new").await.unwrap();
        assert_eq!(first, second, "rotating keeps the agent");
        assert!(store.agent_by_token("old").await.unwrap().is_none(), "{backend}: old token still valid");
        assert_eq!(store.agent_by_token("new").await.unwrap().unwrap().name, "gpu-7");
    })
    .await;
}

#[tokio::test]
async fn sqlite_runs_in_wal_mode() {
    let dbs = databases().await;
    let store = Store::connect(&dbs[0].url).await.unwrap();
    assert_eq!(store.journal_mode().await.unwrap().as_deref(), Some("wal"));
    store.close().await;
    for db in &dbs {
        db.drop_database().await;
    }
}

/// On one pooled connection (so Postgres reuses its prepared statements), every optional column
/// of every insert goes NULL → value → NULL and value → NULL → value, and each run reads back
/// exactly. Before typed binds, Postgres refused the value after a NULL double forever.
#[tokio::test]
async fn store_binds_nulls_and_values_alike() {
    use headroom_server::prices::{self, PriceRow};
    for db in databases().await {
        let store = Store::connect_with(&db.url, 1).await.expect("connect");
        let backend = db.backend;
        let agent_id = agent(&store).await;
        for order in [[false, true, false], [true, false, true]] {
            for with_values in order {
                let run = run_with_optionals(with_values);
                let outcome = store.insert_run(&agent_id, &run).await.unwrap_or_else(|e| {
                    panic!("{backend}: insert with optional values {with_values} after the other form: {e:#}")
                });
                assert!(!outcome.duplicate);
                let detail = store.get_run(run.run_id).await.unwrap().expect("stored");
                assert_eq!(detail.measurements, run.measurements, "{backend}");
                let node = store.list_nodes().await.unwrap().into_iter().find(|n| n.node_id == run.node.node_id);
                let node = node.expect("node stored");
                assert_eq!(node.hourly_usd, run.node.hourly_usd, "{backend}");
                assert_eq!(node.instance_type, run.node.instance_type, "{backend}");

                let mut rows: Vec<PriceRow> = prices::parse(prices::DEFAULT_CATALOG).expect("default catalog");
                for row in &mut rows {
                    if !with_values {
                        row.vcpus = None;
                        row.memory_bytes = None;
                        row.gpu_model = None;
                        row.region = None;
                    }
                }
                store
                    .replace_price_catalog(&rows, "test", "import")
                    .await
                    .unwrap_or_else(|e| panic!("{backend}: catalog with optional values {with_values}: {e:#}"));
                assert_eq!(store.price_catalog().await.unwrap(), rows, "{backend}");
            }
        }
        store.close().await;
        db.drop_database().await;
    }
}

/// A run of four measurements whose optional fields are all absent, or all present.
fn run_with_optionals(with_values: bool) -> model::RunUpload {
    use model::{Floor, MeasurementStatus};
    let mut run = sample_run("node-optional");
    run.measurements.truncate(2);
    run.measurements.extend(sample_run("x").measurements.into_iter().skip(3));
    run.node.hourly_usd = with_values.then_some(1.25);
    run.node.instance_type = with_values.then(|| "m7i.large".to_string());
    for m in &mut run.measurements {
        if with_values {
            m.status = MeasurementStatus::Ok;
            m.reason = None;
            m.stats = Some(common::stats(3.5e-6));
            m.floor = Some(Floor { name: "memcpy".into(), value: 1e-7 });
        } else {
            m.status = MeasurementStatus::Skipped;
            m.reason = Some("no CUDA driver".into());
            m.stats = None;
            m.floor = None;
        }
    }
    run
}

/// Two admins demoting each other at the same instant, many times: every time exactly one
/// change goes through, so an admin is always left (Postgres reads the admins under a row lock;
/// SQLite has one writer).
#[tokio::test]
async fn concurrent_demotions_always_leave_an_admin() {
    use headroom_server::store::PersonChange;
    each_backend(|store, backend| async move {
        let hash = auth::hash_password("s3cret-enough").unwrap();
        for round in 0..40 {
            let a = store.create_user(&format!("a{round}"), Role::Admin, &hash).await.unwrap();
            let b = store.create_user(&format!("b{round}"), Role::Admin, &hash).await.unwrap();
            // Only these two are admins in this round.
            for p in store.list_people().await.unwrap() {
                if p.id != a && p.id != b {
                    assert_eq!(store.set_role(&p.id, Role::Viewer).await.unwrap(), PersonChange::Done, "{backend}");
                }
            }
            let (x, y) = tokio::join!(store.set_role(&a, Role::Viewer), store.set_role(&b, Role::Viewer));
            let (x, y) = (x.unwrap(), y.unwrap());
            let admins = store.list_people().await.unwrap().into_iter().filter(|p| p.role == "admin").count();
            assert_eq!(admins, 1, "{backend}: round {round}: {x:?} and {y:?}");
            assert!(matches!(
                (&x, &y),
                (PersonChange::Done, PersonChange::LastAdmin) | (PersonChange::LastAdmin, PersonChange::Done)
            ));
        }
        // Removal is held to the same rule.
        let last = store.list_people().await.unwrap().into_iter().find(|p| p.role == "admin").unwrap();
        assert_eq!(store.delete_user(&last.id).await.unwrap(), PersonChange::LastAdmin, "{backend}");
        assert_eq!(store.delete_user("no-such-user").await.unwrap(), PersonChange::NoSuchUser, "{backend}");
    })
    .await;
}

/// A run of `node` with a quantization and a transport suite the pages read: FP32 and INT8
/// latencies at two batch sizes, an FP32 throughput, and closed-loop HTTP round trips with
/// their CPU cost at two payloads.
/// The same reading, up to the last bit a JSON round trip of a float may change.
fn same_digest(a: &model::wire::measured::SuiteDigest, b: &model::wire::measured::SuiteDigest) -> bool {
    let close = |x: f64, y: f64| (x - y).abs() <= 1e-12 * x.abs().max(y.abs());
    a.headline.as_ref().map(|h| (&h.name, &h.unit)) == b.headline.as_ref().map(|h| (&h.name, &h.unit))
        && a.headline.as_ref().zip(b.headline.as_ref()).is_none_or(|(x, y)| close(x.value, y.value))
        && a.perf.len() == b.perf.len()
        && a.perf.iter().zip(&b.perf).all(|(x, y)| {
            (x.precision, x.batch_size) == (y.precision, y.batch_size)
                && close(x.service_time_mean_s.0, y.service_time_mean_s.0)
                && close(x.service_time_cv, y.service_time_cv)
        })
        && a.best_throughput_rps.zip(b.best_throughput_rps).is_none_or(|(x, y)| close(x, y))
        && a.best_throughput_rps.is_some() == b.best_throughput_rps.is_some()
        && a.transport.len() == b.transport.len()
        && a.transport.iter().zip(&b.transport).all(|(x, y)| {
            (&x.transport, x.payload_bytes, &x.placement, &x.run_id)
                == (&y.transport, y.payload_bytes, &y.placement, &y.run_id)
                && close(x.latency_p50_s, y.latency_p50_s)
                && close(x.cpu_seconds_per_request, y.cpu_seconds_per_request)
        })
}

#[tokio::test]
async fn each_nodes_latest_run_is_read_from_its_digest_and_older_rows_are_recomputed_then_stored() {
    use model::wire::measured;
    use sqlx::Connection;
    for db in databases().await {
        let backend = db.backend;
        let store = Store::connect(&db.url).await.expect("connect");
        let agent_id = agent(&store).await;
        let t0 = 1_796_000_000_000;
        // node-a: an older slow run and a newer fast one; node-b: one run, measured last.
        let runs = [
            fleet_run("node-a", t0, 3.0),
            fleet_run("node-a", t0 + 60_000, 1.0),
            fleet_run("node-b", t0 + 120_000, 2.0),
        ];
        for run in &runs {
            store.insert_run(&agent_id, run).await.unwrap();
        }
        let expect =
            |run: &model::RunUpload, suite| measured::digest(suite, &run.run_id.to_string(), &run.measurements);
        let check = |latest: Vec<headroom_server::store::RunDigest>, suite, when: &str| {
            let ids: Vec<_> = latest.iter().map(|d| d.run_id).collect();
            assert_eq!(
                ids,
                vec![runs[2].run_id, runs[1].run_id],
                "{backend} {when}: each node's newest run, newest first"
            );
            for (got, run) in latest.iter().zip([&runs[2], &runs[1]]) {
                assert_eq!(got.hostname, run.node.hostname);
                assert!(same_digest(&got.digest, &expect(run, suite)), "{backend} {when}: {:?}", got.digest);
            }
        };
        let quant = store.latest_digests(Suite::Quant, 100).await.unwrap();
        assert_eq!(quant[1].digest.perf.len(), 4, "{backend}: fp32 and int8 at two batch sizes");
        check(quant, Suite::Quant, "as stored at ingest");
        check(store.latest_digests(Suite::Transport, 100).await.unwrap(), Suite::Transport, "as stored at ingest");
        let only_newest = store.latest_digests(Suite::Transport, 1).await.unwrap();
        assert_eq!(only_newest.len(), 1);
        // Both nodes are c7i.2xlarge: one candidate, the newest, standing for the other too.
        let by_type = store.latest_digests_by_type(Suite::Quant).await.unwrap();
        assert_eq!(by_type.len(), 1, "{backend}");
        assert_eq!((by_type[0].0.run_id, by_type[0].1), (runs[2].run_id, 1), "{backend}");
        assert!(same_digest(&by_type[0].0.digest, &expect(&runs[2], Suite::Quant)), "{backend}");
        let trend = store.node_digests("id-node-a", Suite::System, 30).await.unwrap();
        assert_eq!(trend.iter().map(|d| d.run_id).collect::<Vec<_>>(), vec![runs[1].run_id, runs[0].run_id]);
        assert_eq!(trend[0].digest.headline.as_ref().map(|h| h.value), Some(12e9), "{backend}: memcpy headline");

        // Rows as a server before digests left them: read the same, computed from the measurements.
        let mut conn = sqlx::AnyConnection::connect(&db.url).await.unwrap();
        sqlx::query("UPDATE run_suites SET digest_version = 0, digest = NULL").execute(&mut conn).await.unwrap();
        check(store.latest_digests(Suite::Quant, 100).await.unwrap(), Suite::Quant, "computed");
        check(store.latest_digests(Suite::Transport, 100).await.unwrap(), Suite::Transport, "computed");
        let nodes = store.list_nodes().await.unwrap();
        assert!(nodes.iter().all(|n| n.memcpy_bytes_per_second == Some(12e9)), "{backend}: {nodes:?}");
        // A digest that no longer parses is computed too.
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE run_suites SET digest_version = {}, digest = '{{\"perf\": 7}}' WHERE suite = 'quant'",
            measured::DIGEST_VERSION
        )))
        .execute(&mut conn)
        .await
        .unwrap();
        check(store.latest_digests(Suite::Quant, 100).await.unwrap(), Suite::Quant, "unparsable");

        // The start-up backfill stores them: every (run, suite) but the three quant rows.
        let (suites,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM run_suites").fetch_one(&mut conn).await.unwrap();
        assert_eq!(store.refresh_digests().await.unwrap(), suites as u64 - 3, "{backend}");
        assert_eq!(store.refresh_digests().await.unwrap(), 0, "{backend}: nothing left to rewrite");
        let (stale,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*) FROM run_suites WHERE digest_version <> {} OR digest IS NULL",
            measured::digest_version_sql("suite")
        )))
        .fetch_one(&mut conn)
        .await
        .unwrap();
        assert_eq!(stale, 0, "{backend}");
        check(store.latest_digests(Suite::Transport, 100).await.unwrap(), Suite::Transport, "backfilled");
        // A newer node of the type whose latency cases all failed does not stand for it; the
        // newest run that measured one does. A node priced by its operator is a kind of its own.
        let mut failed = fleet_run("node-c", t0 + 180_000, 1.0);
        for m in failed.measurements.iter_mut().filter(|m| m.suite == Suite::Quant) {
            m.status = model::MeasurementStatus::Failed;
            m.stats = None;
        }
        store.insert_run(&agent_id, &failed).await.unwrap();
        let mut priced = fleet_run("node-d", t0 + 30_000, 1.0);
        priced.node.hourly_usd = Some(0.2);
        store.insert_run(&agent_id, &priced).await.unwrap();
        let by_type = store.latest_digests_by_type(Suite::Quant).await.unwrap();
        let chosen: Vec<_> = by_type.iter().map(|(d, others)| (d.run_id, *others)).collect();
        assert_eq!(chosen, vec![(runs[2].run_id, 2), (priced.run_id, 0)], "{backend}");
        conn.close().await.ok();
        store.close().await;
        db.drop_database().await;
    }
}

/// How many of `suite`'s digests are at this build's reading.
async fn current_digests(conn: &mut sqlx::AnyConnection, suite: Suite) -> i64 {
    let sql = format!(
        "SELECT COUNT(*) FROM run_suites WHERE suite = '{}' AND digest_version = {}",
        suite.as_str(),
        model::wire::measured::digest_version(suite)
    );
    sqlx::query_as::<_, (i64,)>(sqlx::AssertSqlSafe(sql)).fetch_one(conn).await.unwrap().0
}

/// After an upgrade the start-up backfill stores the newest runs first, and of replicas
/// started together one does it: a Postgres server that finds another at it waits for its turn
/// (retention too), and the lock goes with the session that took it.
#[tokio::test]
async fn the_backfill_stores_the_newest_runs_first_and_once_across_replicas() {
    use model::wire::measured::digest_version;
    use sqlx::Connection;
    for db in databases().await {
        let backend = db.backend;
        let (a, b) = (Store::connect(&db.url).await.unwrap(), Store::connect(&db.url).await.unwrap());
        let agent_id = agent(&a).await;
        let t0 = 1_796_000_000_000;
        let mut runs = Vec::new();
        // Stored out of time order, so that neither insertion nor id order is newest first.
        for i in [3i64, 0, 7, 1, 9, 4, 2, 8, 6, 5] {
            let run = fleet_run(&format!("node-{}", i % 3), t0 + i * 60_000, 1.0);
            a.insert_run(&agent_id, &run).await.unwrap();
            runs.push(run);
        }
        runs.sort_by_key(|r| std::cmp::Reverse(r.started_at_ms));
        let mut conn = sqlx::AnyConnection::connect(&db.url).await.unwrap();
        sqlx::query("UPDATE run_suites SET digest_version = 0, digest = NULL").execute(&mut conn).await.unwrap();
        assert_eq!(a.refresh_suite_digests(Suite::Quant, 4).await.unwrap(), 4, "{backend}");
        let stored: Vec<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT run_id FROM run_suites WHERE suite = 'quant' AND digest_version = {} ORDER BY run_id",
            digest_version(Suite::Quant)
        )))
        .fetch_all(&mut conn)
        .await
        .unwrap();
        let mut newest: Vec<String> = runs[..4].iter().map(|r| r.run_id.to_string()).collect();
        newest.sort();
        assert_eq!(stored.into_iter().map(|(id,)| id).collect::<Vec<_>>(), newest, "{backend}: the four newest");

        let (rows,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM run_suites").fetch_one(&mut conn).await.unwrap();
        let left = rows as u64 - 4;
        if backend == "postgres" {
            // Another server at it: this one waits for its turn rather than repeat the work,
            // and retention, which cannot wait for ever, says so.
            let mut other = sqlx::PgConnection::connect(&db.url).await.unwrap();
            let lock = headroom_server::store::BACKFILL_LOCK;
            sqlx::query("SELECT pg_advisory_lock($1)").bind(lock).execute(&mut other).await.unwrap();
            let impatient = b.refresh_digests_within(Some(std::time::Duration::from_millis(10))).await.unwrap_err();
            assert!(impatient.to_string().contains("another server has been storing"), "{backend}: {impatient:#}");
            let waiting = tokio::spawn({
                let b = b.clone();
                async move { b.refresh_digests().await.unwrap() }
            });
            tokio::time::sleep(headroom_server::store::BACKFILL_POLL + std::time::Duration::from_millis(500)).await;
            assert!(!waiting.is_finished(), "{backend}: went ahead while another server held the backfill");
            assert_eq!(
                current_digests(&mut conn, Suite::Quant).await,
                4,
                "{backend}: wrote while another server held the backfill"
            );
            // That server's session ends (it finished, or died): the waiting one does what is left.
            other.close().await.unwrap();
            assert_eq!(waiting.await.unwrap(), left, "{backend}");
            // And its turn ended with it: the lock is free again.
            let mut after = sqlx::PgConnection::connect(&db.url).await.unwrap();
            let (free,): (bool,) =
                sqlx::query_as("SELECT pg_try_advisory_lock($1)").bind(lock).fetch_one(&mut after).await.unwrap();
            assert!(free, "{backend}: the backfill's lock outlived its turn");
            after.close().await.unwrap();
        } else {
            assert_eq!(b.refresh_digests().await.unwrap(), left, "{backend}");
        }
        assert_eq!(current_digests(&mut conn, Suite::Quant).await, 10, "{backend}");
        // Replicas starting together: every digest is stored, once (the lock keeps the second
        // from computing them again; the guard on each write would keep it from counting twice).
        sqlx::query("UPDATE run_suites SET digest_version = 0, digest = NULL").execute(&mut conn).await.unwrap();
        let (x, y) = tokio::join!(a.refresh_digests(), b.refresh_digests());
        assert_eq!(x.unwrap() + y.unwrap(), rows as u64, "{backend}");
        // A run whose stored measurement this build cannot read back is left as it was; the
        // runs after it (older ones, here the third newest on) are stored all the same.
        sqlx::query("UPDATE run_suites SET digest_version = 0, digest = NULL").execute(&mut conn).await.unwrap();
        let unreadable = runs[1].run_id.to_string();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE measurements SET unit = 'furlongs' WHERE run_id = '{unreadable}' AND suite = 'quant'"
        )))
        .execute(&mut conn)
        .await
        .unwrap();
        assert_eq!(a.refresh_digests().await.unwrap(), rows as u64 - 1, "{backend}");
        assert_eq!(current_digests(&mut conn, Suite::Quant).await, 9, "{backend}");
        conn.close().await.ok();
        a.close().await;
        b.close().await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn every_page_read_uses_an_index_not_a_scan_of_history() {
    each_backend(|store, backend| async move {
        let agent_id = agent(&store).await;
        let t0 = 1_796_000_000_000;
        // Shaped like a fleet's store, history much longer than the node list: a plan that reads
        // a node's whole history costs the planner more than one that reads a row per node.
        let mut last = None;
        // Four hours apart: 40 days, three months, so three partitions of measurements on Postgres.
        for i in 0..240 {
            let run = fleet_run(&format!("node-{}", i % 4), t0 + i * 4 * 3_600_000, 1.0);
            store.insert_run(&agent_id, &run).await.unwrap();
            last = Some((run.run_id, run.started_at_ms));
        }
        store.analyze().await.unwrap();
        let (last, started) = last.unwrap();
        let plans = store.query_plans("id-node-1", &last.to_string(), started).await.unwrap();
        assert!(plans.len() >= 11, "{backend}: {plans:?}");
        for (read, plan) in &plans {
            eprintln!("{backend} · {read}:\n{plan}\n");
            if backend == "postgres" && read.contains("measurements") {
                // Pruned to the months of the runs read: one for a run, at most two for two.
                let months: std::collections::BTreeSet<_> = plan
                    .split_whitespace()
                    .filter(|w| w.starts_with("measurements_y") && !w.ends_with("_pkey"))
                    .collect();
                let most = if read == "a run's measurements" { 1 } else { 2 };
                assert!((1..=most).contains(&months.len()), "{backend} · {read} reads {months:?}:\n{plan}");
            }
            // However many other endpoint runs there are, the LLM page reads its own index.
            if read == "the newest LLM endpoint runs" {
                assert!(plan.contains("run_suites_llm"), "{backend} · {read} does not use its index:\n{plan}");
            }
            // And the service pickers theirs, however many LLM load tests there are.
            if read == "endpoint runs without an LLM engine" {
                assert!(plan.contains("run_suites_plain"), "{backend} · {read} does not use its index:\n{plan}");
            }
            // The node list is the one read of a whole table, and it holds a row per node.
            if read == "nodes" {
                continue;
            }
            for line in plan.lines().map(str::trim) {
                let line = line.trim_start_matches("->").trim();
                match backend {
                    // A scan without an index, or a sort of everything it found before the limit.
                    "postgres" => {
                        assert!(!line.starts_with("Seq Scan"), "{backend} · {read} scans a table:\n{plan}");
                        // The rows of the runs asked for, or a row per node, may be sorted; lists
                        // of history are read in index order.
                        let bounded = read.contains("measurements") || read.starts_with("each node's");
                        assert!(bounded || !line.starts_with("Sort "), "{backend} · {read} sorts:\n{plan}");
                    }
                    _ => {
                        let scan = line.starts_with("SCAN ") && !line.contains(" USING ");
                        assert!(!scan, "{backend} · {read} scans a table:\n{plan}");
                        assert!(!line.starts_with("USE TEMP B-TREE"), "{backend} · {read} sorts:\n{plan}");
                    }
                }
            }
        }
    })
    .await;
}

/// The first millisecond (UTC) of the day `date`, `YYYY-MM-DD`.
fn day(date: &str) -> i64 {
    model::calendar::Date::parse(date).unwrap().unix_ms()
}

/// The partitions of `measurements` (Postgres), by name.
async fn partitions(conn: &mut sqlx::AnyConnection) -> Vec<String> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT c.relname::TEXT FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
         WHERE i.inhparent = 'measurements'::regclass ORDER BY 1",
    )
    .fetch_all(conn)
    .await
    .unwrap();
    rows.into_iter().map(|(name,)| name).collect()
}

#[tokio::test]
async fn retention_removes_whole_old_months_of_measurements_and_keeps_every_run_and_digest() {
    use model::calendar::Date;
    use sqlx::Connection;
    for db in databases().await {
        let backend = db.backend;
        let postgres = backend == "postgres";
        let store = Store::connect(&db.url).await.expect("connect");
        let agent_id = agent(&store).await;
        // node-a at the last millisecond of January, the first of February and mid-March;
        // node-b in January only.
        let jan_a = fleet_run("node-a", day("2026-02-01") - 1, 3.0);
        let feb_a = fleet_run("node-a", day("2026-02-01"), 2.0);
        let mar_a = fleet_run("node-a", day("2026-03-15"), 1.0);
        let jan_b = fleet_run("node-b", day("2026-01-02"), 1.5);
        for run in [&jan_a, &feb_a, &mar_a, &jan_b] {
            store.insert_run(&agent_id, run).await.unwrap();
        }
        let mut conn = sqlx::AnyConnection::connect(&db.url).await.unwrap();
        if postgres {
            let months = ["measurements_y2026m01", "measurements_y2026m02", "measurements_y2026m03"];
            assert_eq!(partitions(&mut conn).await, months, "a partition per month, the edges in the right one");
        }
        let trend_before = store.node_digests("id-node-a", Suite::Quant, 30).await.unwrap();
        let latest_before = store.latest_digests(Suite::Quant, 100).await.unwrap();
        let same = |a: &[headroom_server::store::RunDigest], b: &[headroom_server::store::RunDigest]| {
            a.len() == b.len()
                && a.iter().zip(b).all(|(x, y)| x.run_id == y.run_id && same_digest(&x.digest, &y.digest))
        };
        let old_count: u64 = [&jan_a, &feb_a, &jan_b].iter().map(|r| r.measurements.len() as u64).sum();

        let march = Date::parse("2026-03-01").unwrap();
        let err = store.remove_measurements_before(Date::parse("2026-03-02").unwrap(), false).await.unwrap_err();
        assert!(err.to_string().contains("not the first day of a month"), "{err}");
        let dry = store.remove_measurements_before(march, true).await.unwrap();
        assert_eq!((dry.runs, dry.measurements, dry.dry_run), (3, old_count, true), "{backend}");
        let old_months = if postgres { vec!["measurements_y2026m01", "measurements_y2026m02"] } else { vec![] };
        assert_eq!(dry.partitions, old_months, "{backend}");
        assert_eq!(store.get_run(jan_a.run_id).await.unwrap().unwrap().measurements, jan_a.measurements);

        let done = store.remove_measurements_before(march, false).await.unwrap();
        assert_eq!((done.runs, done.measurements), (3, old_count), "{backend}");
        assert_eq!(done.partitions, old_months, "{backend}");
        for run in [&jan_a, &feb_a, &jan_b] {
            let detail = store.get_run(run.run_id).await.unwrap().expect("the run stays");
            assert!(detail.measurements.is_empty(), "{backend}");
            assert!(detail.run.measurements_removed_at_ms.is_some(), "{backend}");
            assert_eq!(detail.run.measurement_count, run.measurements.len() as u64, "as uploaded");
        }
        let kept = store.get_run(mar_a.run_id).await.unwrap().unwrap();
        assert_eq!((kept.measurements, kept.run.measurements_removed_at_ms), (mar_a.measurements.clone(), None));
        let (rows,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM measurements").fetch_one(&mut conn).await.unwrap();
        assert_eq!(rows as usize, mar_a.measurements.len(), "{backend}");
        if postgres {
            assert_eq!(partitions(&mut conn).await, ["measurements_y2026m03"]);
        }
        // The pages read the digests stored before, the trend and each node's latest alike.
        assert!(same(&store.node_digests("id-node-a", Suite::Quant, 30).await.unwrap(), &trend_before), "{backend}");
        assert!(same(&store.latest_digests(Suite::Quant, 100).await.unwrap(), &latest_before), "{backend}");
        // Under a newer reading of runs (stale digests), removed runs keep theirs: nothing is
        // computed from measurements that are gone, and the backfill passes them over.
        sqlx::query("UPDATE run_suites SET digest_version = 0").execute(&mut conn).await.unwrap();
        assert!(same(&store.node_digests("id-node-a", Suite::Quant, 30).await.unwrap(), &trend_before), "{backend}");
        assert_eq!(store.refresh_digests().await.unwrap(), mar_a.suites().len() as u64, "{backend}: March only");

        // Nothing left to remove; a late upload of a January run is stored whole (its month
        // made again on Postgres) and goes with the next pass.
        let again = store.remove_measurements_before(march, false).await.unwrap();
        assert_eq!((again.runs, again.measurements, again.partitions.len()), (0, 0, 0), "{backend}");
        let late = fleet_run("node-c", day("2026-01-20"), 1.0);
        store.insert_run(&agent_id, &late).await.unwrap();
        assert_eq!(store.get_run(late.run_id).await.unwrap().unwrap().measurements, late.measurements);
        let last = store.remove_measurements_before(march, false).await.unwrap();
        assert_eq!((last.runs, last.measurements), (1, late.measurements.len() as u64), "{backend}");
        conn.close().await.ok();
        store.close().await;
        db.drop_database().await;
    }
}

/// A connection to `db` with the migrations up to `version` applied and nothing else, holding
/// an agent `a` and a node `n` as a store of that time would.
async fn at_migration(db: &common::TestDb, version: i64) -> sqlx::AnyConnection {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations").join(db.backend);
    let mut conn = sqlx::AnyConnection::connect(&db.url).await.unwrap();
    sqlx::migrate::Migrator::new(dir).await.unwrap().run_to(version, &mut conn).await.unwrap();
    for sql in [
        "INSERT INTO agents (id, name, token_hash, scope, created_at_ms) VALUES ('a', 'old-agent', 'h', 'ingest', 0)",
        "INSERT INTO nodes (id, hostname, cpu_model, cpu_cores, memory_bytes, kernel, gpus_json, first_seen_ms, \
         last_seen_ms) VALUES ('n', 'old-host', 'cpu', 4, 1024, '6.1', '[]', 0, 0)",
    ] {
        sqlx::query(sql).execute(&mut conn).await.unwrap();
    }
    conn
}

/// The number of the newest migration this build has for `backend`.
fn latest_migration(backend: &str) -> usize {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations").join(backend);
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|f| f.ok()?.file_name().to_str()?.split('_').next()?.parse().ok())
        .max()
        .unwrap()
}

/// 0012, 0013, 0015, 0016 and 0017: an endpoint digest of reading 3, 4, 5, 6 or 7 without an
/// LLM fit is what reading 8 stores (4 added the LLM bands, 5 to 8 changed the LLM fit), so it is
/// marked current and the backfill refits only LLM runs; other suites' and LLM runs' stay as
/// they were.
#[tokio::test]
async fn endpoint_digests_without_an_llm_fit_stay_current_when_only_the_llm_fit_changes() {
    use sqlx::Connection;
    for db in databases().await {
        let backend = db.backend;
        let mut conn = at_migration(&db, 11).await;
        for sql in [
            "INSERT INTO runs (id, node_id, agent_id, agent_version, started_at_ms, finished_at_ms, received_at_ms, \
             status, suites, measurement_count) VALUES \
             ('00000000-0000-4000-8000-000000000001', 'n', 'a', '0.1.0', 1, 1, 0, 'ok', 'endpoint,system', 0), \
             ('00000000-0000-4000-8000-000000000002', 'n', 'a', '0.1.0', 2, 2, 0, 'ok', 'endpoint', 0), \
             ('00000000-0000-4000-8000-000000000003', 'n', 'a', '0.1.0', 3, 3, 0, 'ok', 'endpoint', 0), \
             ('00000000-0000-4000-8000-000000000004', 'n', 'a', '0.1.0', 4, 4, 0, 'ok', 'endpoint', 0), \
             ('00000000-0000-4000-8000-000000000005', 'n', 'a', '0.1.0', 5, 5, 0, 'ok', 'endpoint', 0)",
            "INSERT INTO run_suites (suite, run_id, node_id, started_at_ms, digest_version, digest, llm) VALUES \
             ('endpoint', '00000000-0000-4000-8000-000000000001', 'n', 1, 3, '{}', 0), \
             ('system', '00000000-0000-4000-8000-000000000001', 'n', 1, 3, '{}', 0), \
             ('endpoint', '00000000-0000-4000-8000-000000000002', 'n', 2, 3, '{\"llm\":{}}', 1), \
             ('endpoint', '00000000-0000-4000-8000-000000000003', 'n', 3, 0, NULL, 0), \
             ('endpoint', '00000000-0000-4000-8000-000000000004', 'n', 4, 4, '{\"llm\":{}}', 1), \
             ('endpoint', '00000000-0000-4000-8000-000000000005', 'n', 5, 4, '{}', 0)",
        ] {
            sqlx::query(sql).execute(&mut conn).await.unwrap();
        }
        // The runs of reading 4 were stored by a server that had 0012 but not 0013; 0013, 0015,
        // 0016 and 0017 (readings 5 to 8) carry the digests without an LLM fit along.
        let store = Store::connect(&db.url).await.expect("0012, 0013, 0015, 0016 and 0017 apply over stored digests");
        let versions: Vec<(String, String, i64)> =
            sqlx::query_as("SELECT suite, run_id, digest_version FROM run_suites ORDER BY run_id, suite")
                .fetch_all(&mut conn)
                .await
                .unwrap();
        let versions: Vec<(&str, char, i64)> =
            versions.iter().map(|(s, r, v)| (s.as_str(), r.chars().last().unwrap(), *v)).collect();
        let expected = [
            ("endpoint", '1', 8),
            ("system", '1', 3),
            ("endpoint", '2', 3),
            ("endpoint", '3', 0),
            ("endpoint", '4', 4),
            ("endpoint", '5', 8),
        ];
        assert_eq!(versions, expected, "{backend}");
        conn.close().await.ok();
        store.close().await;
        db.drop_database().await;
    }
}

/// A store from before monthly partitions (migrations up to 0006) is moved whole by 0007: every
/// measurement with its run's start time, on Postgres in its month's partition.
#[tokio::test]
async fn measurements_stored_before_partitions_are_moved_into_them() {
    use sqlx::Connection;
    for db in databases().await {
        let backend = db.backend;
        let mut conn = at_migration(&db, 6).await;
        let (jan, feb) = (1_768_000_000_000i64, 1_770_000_000_000i64); // 2026-01-09, 2026-02-02
        for sql in [
            format!(
                "INSERT INTO runs (id, node_id, agent_id, agent_version, started_at_ms, finished_at_ms, received_at_ms, \
                 status, suites, measurement_count) VALUES \
                 ('00000000-0000-4000-8000-000000000001', 'n', 'a', '0.0.9', {jan}, {jan}, 0, 'ok', 'system', 2), \
                 ('00000000-0000-4000-8000-000000000002', 'n', 'a', '0.0.9', {feb}, {feb}, 0, 'ok', 'system', 1)"
            ),
            "INSERT INTO measurements (run_id, seq, suite, case_name, parameters_json, unit, status, samples, mean, p50, \
             p90, p99, p999, ci95_low, ci95_high) VALUES \
             ('00000000-0000-4000-8000-000000000001', 0, 'system', 'memcpy', '{}', 'bytes_per_second', 'ok', 5, 1, 1, 1, 1, 1, 1, 1), \
             ('00000000-0000-4000-8000-000000000001', 1, 'system', 'memcpy', '{\"threads\":\"2\"}', 'bytes_per_second', 'ok', 5, 2, 2, 2, 2, 2, 2, 2), \
             ('00000000-0000-4000-8000-000000000002', 0, 'system', 'memcpy', '{}', 'bytes_per_second', 'ok', 5, 3, 3, 3, 3, 3, 3, 3)"
                .to_string(),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await.unwrap();
        }
        // Retention opens a store without migrating it, and refuses an older schema.
        let err = Store::connect_current(&db.url).await.unwrap_err().to_string();
        let latest = latest_migration(backend);
        assert!(err.contains(&format!("at migration 6 and this build's at {latest}")), "{backend}: {err}");
        let store = Store::connect(&db.url).await.expect("0007 applies over stored runs");
        Store::connect_current(&db.url).await.expect("now current").close().await;
        for (id, means) in [
            ("00000000-0000-4000-8000-000000000001", vec![1.0, 2.0]),
            ("00000000-0000-4000-8000-000000000002", vec![3.0]),
        ] {
            let detail = store.get_run(id.parse().unwrap()).await.unwrap().expect("the run");
            let got: Vec<f64> = detail.measurements.iter().map(|m| m.stats.unwrap().mean).collect();
            assert_eq!(got, means, "{backend}: {id}");
        }
        let (placed,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM measurements m JOIN runs r ON r.id = m.run_id WHERE m.started_at_ms = r.started_at_ms",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        assert_eq!(placed, 3, "{backend}");
        if backend == "postgres" {
            assert_eq!(partitions(&mut conn).await, ["measurements_y2026m01", "measurements_y2026m02"]);
        }
        conn.close().await.ok();
        store.close().await;
        db.drop_database().await;
    }
}

/// Two replicas storing the first runs of the same new months at once: every run is stored,
/// and each month is made once (Postgres; on SQLite the runs simply go in one after another).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_making_the_same_new_month_at_once_store_every_run() {
    for db in databases().await {
        let backend = db.backend;
        let (a, b) = (Store::connect(&db.url).await.unwrap(), Store::connect(&db.url).await.unwrap());
        let agent_id = agent(&a).await;
        let mut tasks = Vec::new();
        for i in 0..16i64 {
            let store = if i % 2 == 0 { a.clone() } else { b.clone() };
            let (agent_id, started) = (agent_id.clone(), if i % 4 < 2 { day("2025-04-10") } else { day("2025-05-10") });
            tasks.push(tokio::spawn(async move {
                let run = fleet_run(&format!("node-{i}"), started + i, 1.0);
                store.insert_run(&agent_id, &run).await.map(|_| run)
            }));
        }
        for task in tasks {
            let run = task.await.unwrap().unwrap_or_else(|e| panic!("{backend}: {e:#}"));
            assert_eq!(a.get_run(run.run_id).await.unwrap().unwrap().measurements, run.measurements, "{backend}");
        }
        if backend == "postgres" {
            let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&db.url).await.unwrap();
            assert_eq!(partitions(&mut conn).await, ["measurements_y2025m04", "measurements_y2025m05"]);
        }
        a.close().await;
        b.close().await;
        db.drop_database().await;
    }
}

/// Retention dropping a month while runs of that month are being stored: every acknowledged
/// run ends whole, or marked as removed with its digests kept; never without its measurements
/// and unmarked (which would show an empty run as if it had measured nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retention_racing_late_uploads_leaves_no_run_emptied_unmarked() {
    for db in databases().await {
        let backend = db.backend;
        let store = Store::connect(&db.url).await.unwrap();
        let agent_id = agent(&store).await;
        store.insert_run(&agent_id, &fleet_run("node-0", day("2026-01-05"), 1.0)).await.unwrap();
        let uploads = {
            let (store, agent_id) = (store.clone(), agent_id.clone());
            tokio::spawn(async move {
                let mut stored = Vec::new();
                for i in 0..40i64 {
                    let run = fleet_run(&format!("node-{}", i % 5), day("2026-01-06") + i * 60_000, 1.0);
                    store.insert_run(&agent_id, &run).await.unwrap();
                    stored.push(run);
                }
                stored
            })
        };
        let march = model::calendar::Date::parse("2026-03-01").unwrap();
        for _ in 0..4 {
            store.remove_measurements_before(march, false).await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let stored = uploads.await.unwrap();
        for run in &stored {
            let detail = store.get_run(run.run_id).await.unwrap().expect("every acknowledged run is stored");
            match detail.run.measurements_removed_at_ms {
                None => assert_eq!(detail.measurements, run.measurements, "{backend}: unmarked, so whole"),
                Some(_) => assert!(detail.measurements.is_empty(), "{backend}: marked, so removed"),
            }
        }
        store.close().await;
        db.drop_database().await;
    }
}

/// A load test of an OpenAI-compatible server on `node` as the agent stores it: four open-loop
/// steps whose figures are what the model predicts for a small engine, so the fit when the run
/// is stored finds an engine (what is under test here is where the run is found, not the fit).
fn llm_run(node: &str, started_at_ms: i64) -> model::RunUpload {
    use model::plan::llm::batching::{Engine, Load, predict};
    use model::units::Seconds;
    use model::{Case, Measurement, MeasurementStatus, Stats, Unit};
    let engine =
        Engine { fixed: Seconds(0.010), per_sequence: Seconds(0.0005), per_prompt_token: Seconds(0.0001), slots: 32 };
    let load = Load { rate: 0.0, input_tokens: 200.0, input_cv: 0.0, output_tokens: 64.0 };
    let requests = 400u64;
    let mut run = sample_run(node);
    run.started_at_ms = started_at_ms;
    run.finished_at_ms = started_at_ms + 80_000;
    run.measurements.clear();
    for (i, rate) in [0.2, 2.0, 5.0, 8.0].into_iter().enumerate() {
        let l = predict(&engine, &Load { rate, ..load }).unwrap().unwrap();
        let parameters = [
            ("step", (i + 1).to_string()),
            ("load", "open".into()),
            ("saturated", "false".into()),
            ("client_limited", "false".into()),
            ("protocol", "openai-chat".into()),
            ("target", "http://llm.internal:8000/v1/chat/completions".into()),
            ("model", "tiny-llama".into()),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .into();
        let m = |case: &str, unit: Unit, stats: Stats| Measurement {
            suite: Suite::Endpoint,
            case: case.into(),
            parameters: std::collections::BTreeMap::clone(&parameters),
            unit,
            status: MeasurementStatus::Ok,
            reason: None,
            histogram: None,
            stats: Some(stats),
            floor: None,
        };
        let quantiles = |p50: f64, p99: f64| Stats { p50, p99, samples: requests, ..Stats::single(p50) };
        run.measurements.extend([
            m(
                Case::EndpointLatency.as_str(),
                Unit::Seconds,
                Stats { samples: requests, ..Stats::single(l.e2e_mean.0) },
            ),
            m(Case::EndpointOfferedRate.as_str(), Unit::RequestsPerSecond, Stats::single(rate)),
            m(Case::EndpointAchievedRate.as_str(), Unit::RequestsPerSecond, Stats::single(rate)),
            m(Case::EndpointErrorRate.as_str(), Unit::Ratio, Stats::single(0.0)),
            m("endpoint_ttft", Unit::Seconds, quantiles(l.ttft_p50.0, l.ttft_p99.0)),
            m("endpoint_itl", Unit::Seconds, Stats { mean: l.itl_mean.0, ..quantiles(l.itl_p50.0, l.itl_p99.0) }),
            m("endpoint_input_tokens", Unit::Count, Stats::single(load.input_tokens * requests as f64)),
            m("endpoint_output_tokens", Unit::Count, Stats::single(load.output_tokens * requests as f64)),
        ]);
    }
    run
}

/// A load test of a plain HTTP endpoint on `node`: one step without tokens, nothing for the
/// LLM page.
fn http_endpoint_run(node: &str, started_at_ms: i64) -> model::RunUpload {
    let mut run = llm_run(node, started_at_ms);
    let llm_only = ["endpoint_ttft", "endpoint_itl", "endpoint_input_tokens", "endpoint_output_tokens"];
    run.measurements.retain(|m| m.parameters["step"] == "1" && !llm_only.contains(&m.case.as_str()));
    for m in &mut run.measurements {
        m.parameters.insert("protocol".into(), "http-json".into());
        m.parameters.remove("model");
    }
    run
}

#[tokio::test]
async fn the_service_pickers_offer_plain_load_tests_and_leave_llm_servers_to_the_llm_page() {
    for db in databases().await {
        let backend = db.backend;
        let app = common::spawn(&db).await;
        let agent_id = agent(&app.store).await;
        let t0 = 1_796_000_000_000;
        let (plain, llm) = (http_endpoint_run("web", t0), llm_run("llm-node", t0 + 60_000));
        app.store.insert_run(&agent_id, &plain).await.unwrap();
        app.store.insert_run(&agent_id, &llm).await.unwrap();
        let listed = |llm: Option<bool>| {
            let filter = RunFilter { suite: Some(Suite::Endpoint), llm, limit: 10, ..Default::default() };
            let store = &app.store;
            async move { store.list_runs(&filter).await.unwrap().into_iter().map(|r| r.run_id).collect::<Vec<_>>() }
        };
        assert_eq!(listed(None).await, [llm.run_id, plain.run_id], "{backend}");
        assert_eq!(listed(Some(false)).await, [plain.run_id], "{backend}");
        assert_eq!(listed(Some(true)).await, [llm.run_id], "{backend}");
        // Right-sizing offers the plain one as "Your service (measured)", sized as a queue of
        // whole requests; the LLM server's load test only on the LLM page. (The Planner reads
        // the same list in the browser: the browser test checks it there.)
        let viewer = app.user_token(Role::Viewer).await;
        let page =
            app.http.get(app.url("/right-sizing")).bearer_auth(&viewer).send().await.unwrap().text().await.unwrap();
        assert!(page.contains(&format!("value=\"{}\"", plain.run_id)), "{backend}: {page}");
        assert!(!page.contains(&llm.run_id.to_string()), "{backend}: {page}");
        let page = app.http.get(app.url("/llm")).bearer_auth(&viewer).send().await.unwrap().text().await.unwrap();
        assert!(page.contains(&format!("value=\"{}\"", llm.run_id)), "{backend}: {page}");
        app.stop().await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn the_llm_page_finds_a_load_test_of_an_llm_server_however_many_other_endpoint_runs_came_since() {
    use sqlx::Connection;
    for db in databases().await {
        let backend = db.backend;
        let app = common::spawn(&db).await;
        let agent_id = agent(&app.store).await;
        let t0 = 1_796_000_000_000;
        let llm = llm_run("llm-node", t0);
        let older = llm_run("llm-node-2", t0 - 60_000);
        app.store.insert_run(&agent_id, &llm).await.unwrap();
        app.store.insert_run(&agent_id, &older).await.unwrap();
        // More plain endpoint runs since than the page ever read before it had its own index.
        for i in 1..=60 {
            let run = http_endpoint_run(&format!("web-{}", i % 3), t0 + i * 60_000);
            app.store.insert_run(&agent_id, &run).await.unwrap();
        }
        let found = |runs: Vec<headroom_server::store::RunDigest>| {
            runs.into_iter().map(|r| (r.run_id, r.digest.llm.is_some())).collect::<Vec<_>>()
        };
        let both = [(llm.run_id, true), (older.run_id, true)];
        assert_eq!(found(app.store.recent_llm_digests(10).await.unwrap()), both, "{backend}");

        // The page offers it to a viewer, sizing with its engine.
        let viewer = app.user_token(Role::Viewer).await;
        let page = app.http.get(app.url("/llm")).bearer_auth(&viewer).send().await.unwrap().text().await.unwrap();
        assert!(page.contains(&format!("value=\"{}\"", llm.run_id)), "{backend}: the picker offers the run: {page}");

        // A digest written by an older reading of runs is left out until the start-up backfill
        // writes it again, flag and all, and does not take a current one's place.
        let mut conn = sqlx::AnyConnection::connect(&db.url).await.unwrap();
        sqlx::query("UPDATE run_suites SET digest_version = 0 WHERE run_id = $1")
            .bind(llm.run_id.to_string())
            .execute(&mut conn)
            .await
            .unwrap();
        assert_eq!(found(app.store.recent_llm_digests(1).await.unwrap()), [(older.run_id, true)], "{backend}");
        sqlx::query("UPDATE run_suites SET digest_version = 0, digest = NULL, llm = 0")
            .execute(&mut conn)
            .await
            .unwrap();
        assert_eq!(found(app.store.recent_llm_digests(10).await.unwrap()), [], "{backend}");
        app.store.refresh_digests().await.unwrap();
        assert_eq!(found(app.store.recent_llm_digests(10).await.unwrap()), both, "{backend}");
        let (flagged,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM run_suites WHERE llm = 1").fetch_one(&mut conn).await.unwrap();
        assert_eq!(flagged, 2, "{backend}: only the LLM runs' endpoint digests");
        conn.close().await.ok();
        app.stop().await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn llm_runs_stored_before_the_flag_are_flagged_by_its_migration() {
    use sqlx::Connection;
    for db in databases().await {
        let backend = db.backend;
        let mut conn = at_migration(&db, 7).await;
        let (llm, plain) = (llm_run("n", 1_768_000_000_000), http_endpoint_run("n", 1_768_000_100_000));
        let digest = |run: &model::RunUpload| {
            let digest = model::wire::measured::digest(Suite::Endpoint, &run.run_id.to_string(), &run.measurements);
            serde_json::to_string(&digest).unwrap()
        };
        assert!(digest(&llm).contains("\"llm\":{") && !digest(&plain).contains("\"llm\""));
        let version = model::wire::measured::digest_version(Suite::Endpoint);
        for sql in [format!(
            "INSERT INTO runs (id, node_id, agent_id, agent_version, started_at_ms, finished_at_ms, received_at_ms, \
                 status, suites, measurement_count) VALUES ('{}', 'n', 'a', '0.0.9', {}, {}, 0, 'ok', 'endpoint', 0), \
                 ('{}', 'n', 'a', '0.0.9', {}, {}, 0, 'ok', 'endpoint', 0)",
            llm.run_id, llm.started_at_ms, llm.started_at_ms, plain.run_id, plain.started_at_ms, plain.started_at_ms
        )] {
            sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await.unwrap();
        }
        for run in [&llm, &plain] {
            sqlx::query(
                "INSERT INTO run_suites (suite, run_id, node_id, started_at_ms, digest_version, digest) \
                 VALUES ('endpoint', $1, 'n', $2, $3, $4)",
            )
            .bind(run.run_id.to_string())
            .bind(run.started_at_ms)
            .bind(version)
            .bind(digest(run))
            .execute(&mut conn)
            .await
            .unwrap();
        }
        let store = Store::connect(&db.url).await.expect("0008 applies over stored runs");
        let found: Vec<_> = store.recent_llm_digests(10).await.unwrap().into_iter().map(|r| r.run_id).collect();
        assert_eq!(found, [llm.run_id], "{backend}: the LLM run, though the plain one is newer");
        conn.close().await.ok();
        store.close().await;
        db.drop_database().await;
    }
}

/// Migration 0009 gives the suites stored before it their class and headline, so a class's
/// older runs are the baseline of its next one: no waiting for 25 new runs after an upgrade.
#[tokio::test]
async fn runs_stored_before_alerts_are_the_baseline_of_the_next() {
    use sqlx::Connection;
    for db in databases().await {
        let backend = db.backend;
        let mut conn = at_migration(&db, 8).await;
        let digest = r#"{"headline":{"name":"memcpy bandwidth","unit":"bytes_per_second","value":12000000000.0}}"#;
        let start = 1_768_000_000_000i64;
        for i in 0..26i64 {
            let id = format!("00000000-0000-4000-8000-{i:012}");
            let at = start + i * 60_000;
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO runs (id, node_id, agent_id, agent_version, started_at_ms, finished_at_ms, received_at_ms, \
                 status, suites, measurement_count) VALUES ('{id}', 'n', 'a', '0.0.9', {at}, {at}, 0, 'ok', 'system', 0)"
            )))
            .execute(&mut conn)
            .await
            .unwrap();
            // One without a digest (stored before 0006) and one whose digest has no headline.
            let digest = match i {
                24 => None,
                25 => Some("{}"),
                _ => Some(digest),
            };
            sqlx::query(
                "INSERT INTO run_suites (suite, run_id, node_id, started_at_ms, digest_version, digest) \
                 VALUES ('system', $1, 'n', $2, 2, $3)",
            )
            .bind(&id)
            .bind(at)
            .bind(digest)
            .execute(&mut conn)
            .await
            .unwrap();
        }
        let store = Store::connect(&db.url).await.expect("0009 applies over stored runs");
        let history = store.class_history("cpu", "system", start + 3_600_000, "z", 100).await.unwrap();
        assert_eq!(history.len(), 24, "{backend}: the class is the node's CPU model; two rows have no headline");
        assert!(history.iter().all(|(v, context)| *v == 12e9 && context.is_none()), "{backend}: {history:?}");
        // The node's next run, 25 % short of that bandwidth, is judged against them.
        let mut run = common::sample_run("old-host");
        run.node.node_id = "n".into();
        run.node.cpu_model = "cpu".into();
        run.node.instance_type = None;
        run.started_at_ms = start + 3_600_000;
        run.finished_at_ms = run.started_at_ms + 5_000;
        let memcpy =
            run.measurements.iter_mut().find(|m| m.parameters.get("bytes").map(String::as_str) == Some("268435456"));
        memcpy.unwrap().stats = Some(common::stats(9.6e9));
        store.insert_run("a", &run).await.unwrap();
        let settings = headroom_server::alerts::Settings::default();
        let recorded = headroom_server::alerts::after_ingest(&store, &settings, &run, "a", true).await;
        assert!(
            matches!(recorded.as_slice(), [headroom_server::store::Recorded::Raised(_)]),
            "{backend}: {recorded:?}"
        );
        let alert = store.alerts(None, 10).await.unwrap().remove(0);
        assert_eq!((alert.class.as_str(), alert.baseline_runs, alert.median), ("cpu", 10, 12e9), "{backend}");
        assert_eq!(alert.changes, "not recorded for the runs before", "{backend}");
        conn.close().await.ok();
        store.close().await;
        db.drop_database().await;
    }
}
