//! Route × role: every route the server serves, called by every kind of caller, on every backend
//! under test. The table below states who may call each route (from the handlers and the
//! README); each call must answer within its caller's rights: refused (401/403, or for pages a
//! redirect to `/login`) below the route's role, let through (2xx, or a redirect that is the
//! route's own answer) at or above it. Writes carry bodies that are valid, so a 2xx proves the
//! caller was let in.

mod common;

use std::collections::BTreeMap;
use std::time::Instant;

use common::{TestApp, databases, sample_run, spawn_with};
use headroom_server::auth::Role;
use proto::pb::ingest_client::IngestClient;
use reqwest::StatusCode;
use serde_json::json;
use tonic::Code;

const METRICS_TOKEN: &str = "prometheus-scraper-secret-0123456789";
/// A report name only finance and admin may see.
const SECRET_REPORT: &str = "roles-secret-report-7f3a";
const LOGIN_PASSWORD: &str = "the login route's password";
/// A person only admins may see listed.
const CANARY_USER: &str = "roles-canary-5d1e";

/// Who may call a route.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Need {
    /// Anyone, signed in or not.
    Anyone,
    /// A person (API token or session) with at least this role.
    Person(Role),
    /// An agent token: ingest only.
    Agent,
    /// The metrics token, or an admin.
    MetricsOrAdmin,
}

/// How a route refuses.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// JSON API, page data (`/srv/*`), metrics: 401 without (valid) credentials, 403 below the role.
    Api,
    /// A page: anyone not signed in as a person is sent to `/login?next=<path>`.
    Page,
    /// gRPC: UNAUTHENTICATED, PERMISSION_DENIED.
    Grpc,
}

#[derive(Clone, Debug)]
enum Body {
    None,
    Json(String),
    Csv(String),
    Form(Vec<(String, String)>),
}

struct Route {
    method: &'static str,
    path: String,
    need: Need,
    kind: Kind,
    body: Body,
    /// What a caller who is let in gets.
    ok: &'static [u16],
}

/// An alert id no alert has.
const NO_ALERT: &str = "00000000-0000-4000-8000-00000000a1e7";

fn route(
    method: &'static str,
    path: impl Into<String>,
    need: Need,
    kind: Kind,
    body: Body,
    ok: &'static [u16],
) -> Route {
    Route { method, path: path.into(), need, kind, body, ok }
}

/// Who a caller is, as far as the server can tell.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Who {
    /// Nobody the store knows: no credentials, or unknown, revoked or expired ones.
    Nobody,
    Agent,
    Person(Role),
    /// The Prometheus scraper's token (known to the server, not to the store).
    Scraper,
}

#[derive(Clone, Debug)]
enum Credential {
    None,
    Bearer(String),
    Cookie(String),
}

struct CallerSpec {
    name: String,
    who: Who,
    credential: Credential,
    /// Sends `Sec-Fetch-Site: cross-site` and a foreign `Origin` on writes.
    cross_site: bool,
}

/// What a call should get.
#[derive(Debug, PartialEq)]
enum Expect {
    /// One of the route's `ok` answers.
    Allowed,
    Status(u16),
    /// 303 to `/login?next=<path>`.
    SignIn,
    Grpc(Code),
}

fn expected(route: &Route, caller: &CallerSpec) -> Expect {
    let cookie = matches!(caller.credential, Credential::Cookie(_));
    if caller.cross_site && route.method != "GET" {
        // A browser's cookie sent by another site: refused before anything else, as a plain
        // HTTP 403 (on the gRPC path too, which then carries no grpc-status).
        return Expect::Status(403);
    }
    let unauthenticated = match route.kind {
        Kind::Api => Expect::Status(401),
        Kind::Page => Expect::SignIn,
        Kind::Grpc => Expect::Grpc(Code::Unauthenticated),
    };
    let forbidden = match route.kind {
        Kind::Api => Expect::Status(403),
        Kind::Page => Expect::SignIn,
        Kind::Grpc => Expect::Grpc(Code::PermissionDenied),
    };
    match (route.need, caller.who) {
        (Need::Anyone, _) => Expect::Allowed,
        (Need::MetricsOrAdmin, Who::Scraper | Who::Person(Role::Admin)) => Expect::Allowed,
        (_, Who::Nobody | Who::Scraper) => unauthenticated,
        (Need::Agent, Who::Agent) => Expect::Allowed,
        // The gRPC door reads only `authorization`: a session cookie is no credential there.
        (Need::Agent, Who::Person(_)) if route.kind == Kind::Grpc && cookie => unauthenticated,
        (Need::Agent, Who::Person(_)) => forbidden,
        (Need::Person(_) | Need::MetricsOrAdmin, Who::Agent) => forbidden,
        (Need::Person(needed), Who::Person(role)) if role >= needed => Expect::Allowed,
        (Need::Person(_) | Need::MetricsOrAdmin, Who::Person(_)) => forbidden,
    }
}

/// Every route, with the role it needs (derived from `Caller::require` in each handler, the
/// page-data `Backend` methods in `web.rs`, `require_sign_in`, the gRPC `authenticate` layer, and
/// the README's table).
/// The ids of what the routes act on.
struct Fixtures {
    run: String,
    scenario: String,
    /// Scenarios to delete: by the API, by the page.
    doomed: [String; 2],
    report: String,
    /// A person whose role admins change.
    target_user: String,
    /// People to remove, API tokens to revoke: by the API, by the page.
    doomed_users: [String; 2],
    doomed_tokens: [String; 2],
}

fn routes(f: &Fixtures) -> Vec<Route> {
    let (run_id, scenario_id, report_id) = (f.run.as_str(), f.scenario.as_str(), f.report.as_str());
    let [doomed_id, doomed_page_id] = [&f.doomed[0], &f.doomed[1]];
    use Kind::{Api, Grpc, Page};
    use Need::{Agent, Anyone, MetricsOrAdmin, Person};
    const VIEWER: Need = Person(Role::Viewer);
    const PLANNER: Need = Person(Role::Planner);
    const FINANCE: Need = Person(Role::Finance);
    const ADMIN: Need = Person(Role::Admin);
    const OK: &[u16] = &[200];
    const CREATED: &[u16] = &[201];
    let run = serde_json::to_string(&run_upload(run_id)).unwrap();
    let form = |pairs: &[(&str, &str)]| Body::Form(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    let catalog = headroom_server::prices::DEFAULT_CATALOG.to_string();
    let grid = headroom_server::grid::DEFAULT_TABLE.to_string();
    let report = json!({
        "name": SECRET_REPORT, "from": "2026-11-01", "to": "2026-11-30",
        "deployments": [{"name": "roles", "team": "t", "serving_cost_per_request_usd": 0.00001,
                         "requests_per_month": 1_000_000}]
    })
    .to_string();
    let scenario = json!({"kind": "planner", "name": "roles scenario", "inputs": {}}).to_string();

    let mut routes = vec![
        // The JSON API.
        route("POST", "/api/v1/runs", Agent, Api, Body::Json(run), &[200, 201]),
        route("GET", "/api/v1/runs", VIEWER, Api, Body::None, OK),
        route("GET", "/api/v1/runs?node=id-node-roles&suite=system&limit=5", VIEWER, Api, Body::None, OK),
        route("GET", format!("/api/v1/runs/{run_id}"), VIEWER, Api, Body::None, OK),
        route("GET", "/api/v1/nodes", VIEWER, Api, Body::None, OK),
        route("GET", "/api/v1/me", VIEWER, Api, Body::None, OK),
        route("GET", "/api/v1/agents", ADMIN, Api, Body::None, OK),
        route(
            "POST",
            "/api/v1/agents",
            ADMIN,
            Api,
            Body::Json(json!({"name": "roles-new-agent", "replace": true}).to_string()),
            CREATED,
        ),
        route("GET", "/api/v1/users", ADMIN, Api, Body::None, OK),
        // The first admin adds the person; later ones find the name taken (after the role check).
        route(
            "POST",
            "/api/v1/users",
            ADMIN,
            Api,
            Body::Json(json!({"name": "roles-added", "role": "viewer"}).to_string()),
            &[201, 409],
        ),
        route(
            "PATCH",
            format!("/api/v1/users/{}", f.target_user),
            ADMIN,
            Api,
            Body::Json(json!({"role": "planner"}).to_string()),
            OK,
        ),
        route("DELETE", format!("/api/v1/users/{}", f.doomed_users[0]), ADMIN, Api, Body::None, &[204, 404]),
        route("GET", "/api/v1/tokens", ADMIN, Api, Body::None, OK),
        route(
            "POST",
            "/api/v1/tokens",
            ADMIN,
            Api,
            Body::Json(json!({"user_id": f.target_user, "expires_in_days": 1}).to_string()),
            CREATED,
        ),
        route("DELETE", format!("/api/v1/tokens/{}", f.doomed_tokens[0]), ADMIN, Api, Body::None, &[204, 404]),
    ];
    for (path, example) in headroom_server::api::model::examples() {
        routes.push(route("POST", path, PLANNER, Api, Body::Json(example.to_string()), OK));
    }
    routes.extend([
        route("GET", "/api/v1/scenarios", VIEWER, Api, Body::None, OK),
        route("GET", format!("/api/v1/scenarios/{scenario_id}"), VIEWER, Api, Body::None, OK),
        route("POST", "/api/v1/scenarios", PLANNER, Api, Body::Json(scenario), CREATED),
        route(
            "PATCH",
            format!("/api/v1/scenarios/{scenario_id}"),
            PLANNER,
            Api,
            Body::Json(json!({"name": "roles renamed"}).to_string()),
            OK,
        ),
        // The first caller let in deletes it; later ones find nothing (the role is checked first,
        // so a 404 is also an answer only a caller let in gets).
        route("DELETE", format!("/api/v1/scenarios/{doomed_id}"), PLANNER, Api, Body::None, &[204, 404]),
        // No alert has this id: callers let in get 404 (the role is checked first).
        route("GET", "/api/v1/alerts", VIEWER, Api, Body::None, OK),
        route("GET", "/api/v1/alerts?state=resolved", VIEWER, Api, Body::None, OK),
        route("GET", format!("/api/v1/alerts/{NO_ALERT}"), VIEWER, Api, Body::None, &[404]),
        route(
            "PATCH",
            format!("/api/v1/alerts/{NO_ALERT}"),
            PLANNER,
            Api,
            Body::Json(json!({"state": "acknowledged"}).to_string()),
            &[404],
        ),
        route("GET", "/api/v1/prices", VIEWER, Api, Body::None, OK),
        route("GET", "/api/v1/prices/versions", VIEWER, Api, Body::None, OK),
        route("POST", "/api/v1/prices", FINANCE, Api, Body::Csv(catalog.clone()), CREATED),
        route("GET", "/api/v1/grid-intensity", VIEWER, Api, Body::None, OK),
        route("GET", "/api/v1/grid-intensity/versions", VIEWER, Api, Body::None, OK),
        route("POST", "/api/v1/grid-intensity", FINANCE, Api, Body::Csv(grid.clone()), CREATED),
        route("POST", "/api/v1/reports", FINANCE, Api, Body::Json(report), CREATED),
        route("GET", "/api/v1/reports", FINANCE, Api, Body::None, OK),
        route("GET", format!("/api/v1/reports/{report_id}"), FINANCE, Api, Body::None, OK),
        route("GET", format!("/api/v1/reports/{report_id}.csv"), FINANCE, Api, Body::None, OK),
        route("GET", format!("/api/v1/reports/{report_id}.xlsx"), FINANCE, Api, Body::None, OK),
        route("GET", format!("/api/v1/reports/{report_id}.parquet"), FINANCE, Api, Body::None, OK),
        route("GET", format!("/api/v1/reports/{report_id}/chargeback"), FINANCE, Api, Body::None, OK),
        route("GET", format!("/api/v1/reports/{report_id}/chargeback.csv"), FINANCE, Api, Body::None, OK),
        route("GET", format!("/api/v1/reports/{report_id}/forecast"), FINANCE, Api, Body::None, OK),
        route("GET", format!("/api/v1/reports/{report_id}/forecast.xlsx"), FINANCE, Api, Body::None, OK),
        route("GET", "/api/v1/budgets", FINANCE, Api, Body::None, OK),
        route(
            "PUT",
            "/api/v1/budgets",
            FINANCE,
            Api,
            Body::Json(json!({"scope": "team", "name": "roles", "monthly_usd": "100"}).to_string()),
            OK,
        ),
        // No budget has this id: callers let in get 404 (the role is checked first).
        route("DELETE", format!("/api/v1/budgets/{NO_ALERT}"), FINANCE, Api, Body::None, &[404]),
        // Health, metrics, the API's description, the bundle, sign-in.
        route("GET", "/healthz", Anyone, Api, Body::None, OK),
        route("GET", "/readyz", Anyone, Api, Body::None, OK),
        route("GET", "/api/openapi.json", Anyone, Api, Body::None, OK),
        route("GET", "/metrics", MetricsOrAdmin, Api, Body::None, OK),
        route("GET", "/pkg/headroom.css", Anyone, Api, Body::None, OK),
        route("GET", "/no-such-page", Anyone, Api, Body::None, &[404]),
        route("GET", "/login", Anyone, Page, Body::None, OK),
        route("POST", "/login", Anyone, Api, form(&[("name", "roles-login"), ("password", LOGIN_PASSWORD)]), &[303]),
    ]);
    // Pages: any signed-in person (the data on them is checked per role by the `/srv/*` calls
    // they make, below, and by the content check in the test).
    for page in
        ["/fleet", "/planner", "/right-sizing", "/transport", "/scenarios", "/reports", "/budgets", "/admin", "/alerts"]
    {
        routes.push(route("GET", page, VIEWER, Page, Body::None, OK));
    }
    let compare = format!("/scenarios/compare?a={scenario_id}&b={scenario_id}");
    routes.push(route("GET", compare, VIEWER, Page, Body::None, OK));
    routes.push(route("GET", format!("/runs/{run_id}"), VIEWER, Page, Body::None, OK));
    // Leptos' <Redirect> answers 200 with `Location: /fleet` (see the check in the test).
    routes.push(route("GET", "/", VIEWER, Page, Body::None, OK));
    // Page data: the server functions.
    for (endpoint, need, body) in [
        ("fleet", VIEWER, form(&[])),
        ("measured_nodes", VIEWER, form(&[])),
        ("transport_runs", VIEWER, form(&[])),
        ("run_page", VIEWER, form(&[("run_id", run_id)])),
        ("scenarios", VIEWER, form(&[])),
        ("alerts", VIEWER, form(&[])),
        ("scenario", VIEWER, form(&[("id", scenario_id)])),
        ("rename_scenario", PLANNER, form(&[("id", scenario_id), ("name", "roles page rename")])),
        ("price_catalog", VIEWER, form(&[])),
        ("grid_table", VIEWER, form(&[])),
        ("save_scenario", PLANNER, form(&[("kind", "planner"), ("name", "roles page scenario"), ("query", "")])),
        ("import_prices", FINANCE, form(&[("csv", catalog.as_str())])),
        ("import_grid", FINANCE, form(&[("csv", grid.as_str())])),
        ("reports", FINANCE, form(&[])),
        ("budgets", FINANCE, form(&[])),
        ("set_budget", FINANCE, form(&[("scope", "deployment"), ("name", "roles"), ("monthly_usd", "50")])),
        // Signed-in people who are not admins get nothing (the page then shows only prices).
        ("people", VIEWER, form(&[])),
        ("set_user_role", ADMIN, form(&[("id", &f.target_user), ("role", "finance")])),
        ("create_api_token", ADMIN, form(&[("user_id", &f.target_user), ("expires_in_days", "2")])),
        ("create_agent_token", ADMIN, form(&[("name", "roles-page-agent"), ("replace", "true")])),
        (
            "report_from_scenarios",
            FINANCE,
            form(&[("name", "roles page report"), ("team", "roles"), ("from", "2026-11-01"), ("to", "2026-11-30")]),
        ),
    ] {
        routes.push(route("POST", format!("/srv/{endpoint}"), need, Api, body, OK));
    }
    routes.push(route(
        "POST",
        "/srv/set_alert_state",
        PLANNER,
        Api,
        form(&[("id", NO_ALERT), ("state", "resolved")]),
        &[404],
    ));
    routes.push(route("POST", "/srv/delete_budget", FINANCE, Api, form(&[("id", NO_ALERT)]), &[404]));
    // Like the API's DELETE: the first caller let in deletes, later ones get 404.
    routes.push(route("POST", "/srv/delete_scenario", PLANNER, Api, form(&[("id", doomed_page_id)]), &[200, 404]));
    routes.push(route(
        "POST",
        "/srv/create_user",
        ADMIN,
        Api,
        form(&[("name", "roles-page-added"), ("role", "viewer")]),
        &[200, 409],
    ));
    routes.push(route("POST", "/srv/delete_user", ADMIN, Api, form(&[("id", &f.doomed_users[1])]), &[200, 404]));
    routes.push(route("POST", "/srv/revoke_api_token", ADMIN, Api, form(&[("id", &f.doomed_tokens[1])]), &[200, 404]));
    // gRPC ingest.
    routes.push(route("POST", "/headroom.v1.Ingest/UploadRun", Agent, Grpc, Body::None, &[]));
    // Last: signing out ends the session cookies the callers hold.
    routes.push(route("POST", "/logout", Anyone, Api, form(&[]), &[303]));
    routes
}

/// The OpenAPI document is built from the routes themselves; here it must also be this table:
/// every documented operation is called by every caller below, and every API route below is
/// documented.
async fn documented_routes_are_the_table(app: &TestApp, routes: &[Route]) {
    let doc: serde_json::Value = app.http.get(app.url("/api/openapi.json")).send().await.unwrap().json().await.unwrap();
    let fits = |template: &str, path: &str| {
        let path = path.split('?').next().unwrap_or_default();
        let (t, p): (Vec<_>, Vec<_>) = (template.split('/').collect(), path.split('/').collect());
        t.len() == p.len() && t.iter().zip(&p).all(|(t, p)| t.starts_with('{') || t == p)
    };
    let mut documented = Vec::new();
    for (template, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().unwrap().keys() {
            let method = method.to_uppercase();
            let served = routes.iter().any(|r| r.method == method && fits(template, &r.path));
            assert!(served, "{method} {template} is documented but not in the route table");
            documented.push((method, template.clone()));
        }
    }
    for route in routes.iter().filter(|r| r.path.starts_with("/api/v1/")) {
        let known = documented.iter().any(|(m, t)| *m == route.method && fits(t, &route.path));
        assert!(known, "{} {} is served but not documented", route.method, route.path);
    }
    assert!(documented.len() >= 30, "{} operations documented", documented.len());
}

fn run_upload(run_id: &str) -> model::RunUpload {
    let mut run = sample_run("node-roles");
    run.run_id = run_id.parse().unwrap();
    run
}

/// The callers: nobody, an agent, each role by API token and by session, and dead credentials.
async fn callers(app: &TestApp, agent: &str) -> Vec<CallerSpec> {
    let mut callers = vec![CallerSpec {
        name: "anonymous".into(),
        who: Who::Nobody,
        credential: Credential::None,
        cross_site: false,
    }];
    callers.push(CallerSpec {
        name: "agent token".into(),
        who: Who::Agent,
        credential: Credential::Bearer(agent.to_string()),
        cross_site: false,
    });
    for role in Role::ALL {
        callers.push(CallerSpec {
            name: format!("{} token", role.as_str()),
            who: Who::Person(role),
            credential: Credential::Bearer(app.user_token(role).await),
            cross_site: false,
        });
    }
    for role in Role::ALL {
        callers.push(CallerSpec {
            name: format!("{} session", role.as_str()),
            who: Who::Person(role),
            credential: Credential::Cookie(app.session(role).await),
            cross_site: false,
        });
    }
    // An admin's revoked and expired API tokens, and tokens nobody issued.
    headroom_server::admin::create_user(&app.store, "roles-revoked", Role::Admin, None).await.unwrap();
    let (revoked, id) =
        headroom_server::admin::create_expiring_api_token(&app.store, "roles-revoked", None).await.unwrap();
    assert!(app.store.revoke_api_token(&id).await.unwrap());
    let user = app.store.user_by_name("roles-revoked").await.unwrap().unwrap();
    let expired = "hr_api_roles_expired".to_string();
    let hash = headroom_server::auth::hash_token(&expired);
    app.store.create_api_token(&user.id, &hash, Some(headroom_server::store::now_ms() - 1)).await.unwrap();
    // An admin's session after signing out.
    let ended = app.session(Role::Admin).await;
    let out = app.http.post(app.url("/logout")).header("cookie", &ended).send().await.unwrap();
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    for (name, credential) in [
        ("revoked admin token", Credential::Bearer(revoked)),
        ("expired admin token", Credential::Bearer(expired)),
        ("unknown token", Credential::Bearer("hr_api_0123456789abcdef".into())),
        ("signed-out admin session", Credential::Cookie(ended)),
        ("forged session", Credential::Cookie("headroom_session=forged".into())),
    ] {
        callers.push(CallerSpec { name: name.into(), who: Who::Nobody, credential, cross_site: false });
    }
    callers.push(CallerSpec {
        name: "metrics token".into(),
        who: Who::Scraper,
        credential: Credential::Bearer(METRICS_TOKEN.into()),
        cross_site: false,
    });
    callers.push(CallerSpec {
        name: "admin session, cross-site".into(),
        who: Who::Person(Role::Admin),
        credential: Credential::Cookie(app.session(Role::Admin).await),
        cross_site: true,
    });
    callers
}

/// What one call got: the HTTP status (or gRPC code), where it redirects, and its body.
struct Answer {
    status: Option<u16>,
    code: Option<Code>,
    location: String,
    body: String,
}

impl Answer {
    fn label(&self) -> String {
        match (self.status, self.code) {
            (_, Some(code)) => format!("{code:?}"),
            (Some(303), None) if self.location.starts_with("/login?next=") => "303→login".into(),
            (Some(status), None) => status.to_string(),
            (None, None) => "none".into(),
        }
    }
}

async fn call(app: &TestApp, route: &Route, caller: &CallerSpec) -> Answer {
    if route.kind == Kind::Grpc {
        return call_grpc(app, caller).await;
    }
    let mut request = app.http.request(route.method.parse().unwrap(), app.url(&route.path));
    match &caller.credential {
        Credential::None => {}
        Credential::Bearer(token) => request = request.bearer_auth(token),
        Credential::Cookie(cookie) => {
            request = request.header("cookie", cookie);
            if route.method != "GET" {
                // What a browser sends with a form or fetch from the app's own pages.
                let (origin, site) = if caller.cross_site {
                    ("http://evil.example".to_string(), "cross-site")
                } else {
                    (format!("http://{}", app.addr), "same-origin")
                };
                request = request.header("origin", origin).header("sec-fetch-site", site);
            }
        }
    }
    request = match &route.body {
        Body::None => request,
        Body::Json(text) => request.header("content-type", "application/json").body(text.clone()),
        Body::Csv(text) => request.header("content-type", "text/csv").body(text.clone()),
        Body::Form(pairs) => request.form(pairs),
    };
    let response = request.send().await.expect("an answer");
    let status = response.status().as_u16();
    let location = response.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let body = String::from_utf8_lossy(&response.bytes().await.unwrap_or_default()).to_string();
    Answer { status: Some(status), code: None, location, body }
}

/// Uploads a valid run (always the same one: a second upload is acknowledged as a duplicate).
async fn call_grpc(app: &TestApp, caller: &CallerSpec) -> Answer {
    if caller.cross_site {
        // The refusal is not gRPC-shaped, so read it as HTTP: an empty message in one frame.
        let h2 = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
        let Credential::Cookie(cookie) = &caller.credential else { unreachable!("cross-site callers use cookies") };
        let response = h2
            .post(app.url("/headroom.v1.Ingest/UploadRun"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("cookie", cookie)
            .header("origin", "http://evil.example")
            .header("sec-fetch-site", "cross-site")
            .body(vec![0u8; 5])
            .send()
            .await
            .expect("an answer");
        let grpc_status = response.headers().get("grpc-status").and_then(|v| v.to_str().ok()).map(str::to_string);
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        return Answer {
            status: Some(status),
            code: grpc_status.and_then(|s| s.parse().ok()).map(Code::from_i32),
            location: String::new(),
            body,
        };
    }
    let mut client = IngestClient::connect(app.base.clone()).await.expect("gRPC connect");
    let mut request = tonic::Request::new(proto::pb::RunUpload::from(&run_upload(GRPC_RUN)));
    let metadata = request.metadata_mut();
    match &caller.credential {
        Credential::None => {}
        Credential::Bearer(token) => {
            metadata.insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        Credential::Cookie(cookie) => {
            metadata.insert("cookie", cookie.parse().unwrap());
            if caller.cross_site {
                metadata.insert("origin", "http://evil.example".parse().unwrap());
                metadata.insert("sec-fetch-site", "cross-site".parse().unwrap());
            }
        }
    }
    let (code, body) = match client.upload_run(request).await {
        Ok(ack) => (Code::Ok, format!("{:?}", ack.into_inner())),
        Err(status) => (status.code(), status.message().to_string()),
    };
    Answer { status: None, code: Some(code), location: String::new(), body }
}

const GRPC_RUN: &str = "6f1c7d0e-52a4-4d1b-9a55-3f0a9e6f2b10";

/// Whether `answer` is what `expect` says for `route`.
fn matches(route: &Route, expect: &Expect, answer: &Answer) -> bool {
    match expect {
        Expect::Allowed if route.kind == Kind::Grpc => answer.code == Some(Code::Ok),
        Expect::Allowed => {
            answer.status.is_some_and(|s| route.ok.contains(&s))
                && !answer.location.starts_with("/login?next=")
                && answer.code.is_none()
        }
        Expect::Status(status) => answer.status == Some(*status),
        Expect::SignIn => {
            // The whole link, query included, percent-encoded as one query value.
            let next: String = route
                .path
                .bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect();
            answer.status == Some(303) && answer.location == format!("/login?next={next}")
        }
        Expect::Grpc(code) => answer.code == Some(*code),
    }
}

#[tokio::test]
async fn every_route_answers_each_caller_within_its_role() {
    let started = Instant::now();
    let mut failures = Vec::new();
    for db in databases().await {
        let backend_started = Instant::now();
        let site = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(site.path().join("pkg")).unwrap();
        std::fs::write(site.path().join("pkg/headroom.css"), "body {}").unwrap();
        let root = site.path().to_path_buf();
        let app = spawn_with(&db, move |state| {
            *state = headroom_server::AppState::new(state.store.clone(), &root);
            state.metrics_token_hash = Some(headroom_server::auth::hash_token(METRICS_TOKEN));
        })
        .await;

        // What the routes read: a run, a scenario, a report, a person to sign in as.
        let agent = app.agent_token("agent-roles").await;
        let run_id = uuid::Uuid::new_v4().to_string();
        let (status, _) =
            common::post(&app, Some(&agent), "/api/v1/runs", serde_json::to_string(&run_upload(&run_id)).unwrap())
                .await;
        assert_eq!(status, StatusCode::CREATED);
        let planner = app.user_token(Role::Planner).await;
        let scenario = json!({"kind": "planner", "name": "roles setup", "inputs": {}}).to_string();
        let (status, scenario) = common::post(&app, Some(&planner), "/api/v1/scenarios", scenario).await;
        assert_eq!(status, StatusCode::CREATED, "{scenario}");
        let mut doomed = Vec::new();
        for name in ["roles doomed", "roles doomed page"] {
            let body = json!({"kind": "planner", "name": name, "inputs": {}}).to_string();
            let (status, saved) = common::post(&app, Some(&planner), "/api/v1/scenarios", body).await;
            assert_eq!(status, StatusCode::CREATED, "{saved}");
            doomed.push(saved["id"].as_str().unwrap().to_string());
        }
        let finance = app.user_token(Role::Finance).await;
        let report = json!({"name": SECRET_REPORT, "from": "2026-10-01", "to": "2026-10-31",
            "deployments": [{"name": "setup", "serving_cost_per_request_usd": 0.00001, "requests_per_month": 1000}]});
        let (status, report) = common::post(&app, Some(&finance), "/api/v1/reports", report.to_string()).await;
        assert_eq!(status, StatusCode::CREATED, "{report}");
        headroom_server::admin::create_user(&app.store, "roles-login", Role::Viewer, Some(LOGIN_PASSWORD.into()))
            .await
            .unwrap();

        // People and tokens the admin routes act on, and one only admins may see listed.
        // (user id, the id of an API token of theirs)
        let person = |name: &'static str| {
            let store = app.store.clone();
            async move {
                headroom_server::admin::create_user(&store, name, Role::Viewer, None).await.unwrap();
                let id = store.user_by_name(name).await.unwrap().unwrap().id;
                let (_, token_id, _) = headroom_server::admin::api_token_for(&store, &id, None).await.unwrap();
                (id, token_id)
            }
        };
        let (target_user, _) = person("roles-target").await;
        let (_, _) = person(CANARY_USER).await;
        let (doomed_user, _) = person("roles-doomed-user").await;
        let (doomed_page_user, _) = person("roles-doomed-page-user").await;
        let (_, doomed_token) = person("roles-token-holder").await;
        let (_, doomed_page_token) = person("roles-page-token-holder").await;
        let fixtures = Fixtures {
            run: run_id.clone(),
            scenario: scenario["id"].as_str().unwrap().to_string(),
            doomed: [doomed[0].clone(), doomed[1].clone()],
            report: report["id"].as_str().unwrap().to_string(),
            target_user,
            doomed_users: [doomed_user, doomed_page_user],
            doomed_tokens: [doomed_token, doomed_page_token],
        };
        let routes = routes(&fixtures);
        documented_routes_are_the_table(&app, &routes).await;
        let callers = callers(&app, &agent).await;
        let mut matrix: Vec<(String, Vec<String>)> = Vec::new();
        let mut calls = 0;
        for route in &routes {
            let mut row = Vec::new();
            for caller in &callers {
                let expect = expected(route, caller);
                let answer = call(&app, route, caller).await;
                calls += 1;
                let ok = matches(route, &expect, &answer);
                row.push(format!("{}{}", answer.label(), if ok { "" } else { "!" }));
                if !ok {
                    failures.push(format!(
                        "{}: {} {} as {}: expected {expect:?}, got {} (location {:?}) {:.200}",
                        app.backend,
                        route.method,
                        route.path,
                        caller.name,
                        answer.label(),
                        answer.location,
                        answer.body
                    ));
                }
                // Nothing of the finance-only report reaches anyone refused.
                if expect != Expect::Allowed && answer.body.contains(SECRET_REPORT) {
                    failures.push(format!(
                        "{}: {} {} as {} was refused but shows the report's name",
                        app.backend, route.method, route.path, caller.name
                    ));
                }
                // Only admins see who can sign in: not refused callers, not the page data or the
                // Admin page of anyone else.
                let admin = caller.who == Who::Person(Role::Admin);
                let lists_people = route.path == "/srv/people" || route.path == "/admin";
                if (expect != Expect::Allowed || (lists_people && !admin)) && answer.body.contains(CANARY_USER) {
                    failures.push(format!(
                        "{}: {} {} as {} shows a person only admins may see",
                        app.backend, route.method, route.path, caller.name
                    ));
                }
                if route.path == "/srv/people"
                    && admin
                    && expect == Expect::Allowed
                    && !answer.body.contains(CANARY_USER)
                {
                    failures.push(format!("{}: /srv/people as {} does not list the people", app.backend, caller.name));
                }
                // `/` sends people on to the Fleet page.
                if route.path == "/" && expect == Expect::Allowed && answer.location != "/fleet" {
                    failures.push(format!("{}: / as {} does not point to /fleet", app.backend, caller.name));
                }
                // The Reports and Budgets pages render for every person, but only finance and
                // admin see reports.
                if (route.path == "/reports" || route.path == "/budgets") && route.method == "GET" {
                    let may_see = matches!(caller.who, Who::Person(r) if r >= Role::Finance);
                    let sees = answer.body.contains(SECRET_REPORT);
                    if expect == Expect::Allowed && sees != may_see {
                        failures.push(format!(
                            "{}: {} as {}: shows the report's name: {sees}, may: {may_see}",
                            app.backend, route.path, caller.name
                        ));
                    }
                }
            }
            matrix.push((format!("{} {}", route.method, route.path), row));
        }

        eprintln!(
            "\nroute × caller on {} ({calls} calls, {:.1} s):",
            app.backend,
            backend_started.elapsed().as_secs_f64()
        );
        eprintln!(
            "{}",
            callers.iter().enumerate().map(|(i, c)| format!("c{i} = {}", c.name)).collect::<Vec<_>>().join(", ")
        );
        let header: Vec<String> = (0..callers.len()).map(|i| format!("{:>9}", format!("c{i}"))).collect();
        eprintln!("{:<58}{}", "route", header.join(""));
        for (name, row) in &matrix {
            let name: String = name.chars().take(57).collect();
            eprintln!("{name:<58}{}", row.iter().map(|c| format!("{c:>9}")).collect::<String>());
        }
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for (_, row) in &matrix {
            for cell in row {
                *seen.entry(cell.clone()).or_default() += 1;
            }
        }
        eprintln!("answers: {seen:?}");
        assert!(calls >= routes.len() * callers.len());
        app.stop().await;
        db.drop_database().await;
    }
    eprintln!("route × role took {:.1} s", started.elapsed().as_secs_f64());
    assert!(
        failures.is_empty(),
        "{} calls answered beyond or below the caller's rights:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
