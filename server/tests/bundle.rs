//! What a browser gets: the release bundle under its hashed names, cached a year and sent
//! precompressed; pages and JSON compressed as the client accepts; and a broken release folder
//! falling back to the plain names instead of pages naming files that are not there.

mod common;

use std::io::Read;
use std::path::Path;

use common::{post, sample_run, spawn_with};
use headroom_server::auth::Role;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, VARY};

const HASHED: &str = "headroom.00c0ffee00c0ffee";
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// A site folder like a release build's: hashed files, a `.br` and `.gz` of the stylesheet,
/// the icon, and the manifest naming them.
fn release_site(dir: &Path, css: &str) {
    let pkg = dir.join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join(format!("{HASHED}.js")), "export default function init() {}").unwrap();
    std::fs::write(pkg.join(format!("{HASHED}_bg.wasm")), b"\0asm\x01\0\0\0").unwrap();
    std::fs::write(pkg.join(format!("{HASHED}.css")), css).unwrap();
    let mut br = Vec::new();
    let params = brotli::enc::BrotliEncoderParams::default();
    brotli::BrotliCompress(&mut css.as_bytes(), &mut br, &params).unwrap();
    std::fs::write(pkg.join(format!("{HASHED}.css.br")), br).unwrap();
    std::fs::write(pkg.join("favicon.svg"), "<svg xmlns=\"http://www.w3.org/2000/svg\"/>").unwrap();
    std::fs::write(dir.join("bundle.json"), format!("{{\"output_name\": \"{HASHED}\"}}")).unwrap();
}

async fn serving(site: &Path) -> (common::TestDb, common::TestApp) {
    let db = common::sqlite();
    let root = site.to_path_buf();
    let app = spawn_with(&db, move |state| {
        *state = headroom_server::AppState::new(state.store.clone(), &root);
    })
    .await;
    (db, app)
}

fn header(response: &reqwest::Response, name: reqwest::header::HeaderName) -> String {
    response.headers().get_all(name).iter().map(|v| v.to_str().unwrap()).collect::<Vec<_>>().join(", ")
}

fn decode(encoding: &str, bytes: &[u8]) -> String {
    let mut out = String::new();
    match encoding {
        "br" => brotli::Decompressor::new(bytes, 4096).read_to_string(&mut out),
        "gzip" => flate2::read::GzDecoder::new(bytes).read_to_string(&mut out),
        other => panic!("unexpected encoding {other:?}"),
    }
    .unwrap_or_else(|e| panic!("the {encoding} body does not decode: {e}"));
    out
}

#[tokio::test]
async fn a_release_bundle_is_named_by_content_cached_a_year_and_sent_precompressed() {
    let site = tempfile::tempdir().unwrap();
    let css = format!("body {{ margin: 0 }}\n{}", ".card { padding: 1rem }\n".repeat(100));
    release_site(site.path(), &css);
    let (_db, app) = serving(site.path()).await;

    let page = app.http.get(app.url("/login")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let html = page.text().await.unwrap();
    for file in [format!("/pkg/{HASHED}.css"), format!("/pkg/{HASHED}.js"), format!("/pkg/{HASHED}_bg.wasm")] {
        assert!(html.contains(&file), "the page does not name {file}:\n{html}");
    }
    assert!(!html.contains("/pkg/headroom.css"), "the page names the plain stylesheet");

    let url = app.url(&format!("/pkg/{HASHED}.css"));
    let br = app.http.get(&url).header(ACCEPT_ENCODING, "gzip, deflate, br").send().await.unwrap();
    assert_eq!(br.status(), StatusCode::OK);
    assert_eq!(header(&br, CONTENT_ENCODING), "br", "the .br beside the file was not sent");
    assert_eq!(header(&br, CACHE_CONTROL), IMMUTABLE);
    assert!(header(&br, VARY).to_ascii_lowercase().contains("accept-encoding"), "no Vary: {:?}", br.headers());
    assert_eq!(decode("br", &br.bytes().await.unwrap()), css);

    // No .gz beside it: a gzip-only client gets the file as it is.
    let plain = app.http.get(&url).header(ACCEPT_ENCODING, "gzip").send().await.unwrap();
    assert_eq!(header(&plain, CONTENT_ENCODING), "");
    assert_eq!(header(&plain, CACHE_CONTROL), IMMUTABLE);
    assert_eq!(plain.text().await.unwrap(), css);

    // Files not named by content are checked on every use; a miss is never kept a year.
    let icon = app.http.get(app.url("/pkg/favicon.svg")).send().await.unwrap();
    assert_eq!(icon.status(), StatusCode::OK);
    assert_eq!(header(&icon, CACHE_CONTROL), "no-cache");
    let missing = app.http.get(app.url(&format!("/pkg/{HASHED}.js.map"))).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_eq!(header(&missing, CACHE_CONTROL), "no-cache");
    let outside = app.http.get(app.url("/pkg/..%2Fbundle.json")).send().await.unwrap();
    assert_eq!(outside.status(), StatusCode::NOT_FOUND, "a file outside pkg/ was served");
    app.stop().await;
}

#[tokio::test]
async fn a_manifest_that_names_missing_or_odd_files_is_ignored() {
    for manifest in [
        "{\"output_name\": \"headroom.ffffffffffffffff\"}".to_string(),
        "{\"output_name\": \"../../etc/passwd\"}".to_string(),
        "{\"output_name\": \"headroom.\\\"><script>alert(1)</script>\"}".to_string(),
        "not json".to_string(),
    ] {
        let site = tempfile::tempdir().unwrap();
        release_site(site.path(), "body {}");
        std::fs::write(site.path().join("pkg/headroom.css"), "body {}").unwrap();
        std::fs::write(site.path().join("bundle.json"), &manifest).unwrap();
        let (_db, app) = serving(site.path()).await;
        let html = app.http.get(app.url("/login")).send().await.unwrap().text().await.unwrap();
        assert!(html.contains("/pkg/headroom.css"), "{manifest}: the page does not fall back to the plain names");
        assert!(!html.contains("<script>alert"), "{manifest}: the manifest's name reached the page");
        let css = app.http.get(app.url("/pkg/headroom.css")).send().await.unwrap();
        assert_eq!(header(&css, CACHE_CONTROL), "no-cache", "{manifest}: plain names are not immutable");
        app.stop().await;
    }
}

#[tokio::test]
async fn pages_and_json_are_compressed_as_the_client_accepts() {
    let db = common::sqlite();
    let app = spawn_with(&db, |_| {}).await;
    let mut decoded = Vec::new();
    for (accept, encoding) in [("br;q=1.0, gzip;q=0.5", "br"), ("gzip", "gzip"), ("identity", "")] {
        let page = app.http.get(app.url("/login")).header(ACCEPT_ENCODING, accept).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK);
        assert_eq!(header(&page, CONTENT_ENCODING), encoding, "Accept-Encoding: {accept}");
        assert!(header(&page, VARY).to_ascii_lowercase().contains("accept-encoding"), "{accept}: no Vary");
        let bytes = page.bytes().await.unwrap();
        let html =
            if encoding.is_empty() { String::from_utf8(bytes.to_vec()).unwrap() } else { decode(encoding, &bytes) };
        // Leptos ends the stream with its resource scripts, after `</html>`; with erased views
        // its hydration markers (`<!>`) sit between `</body>` and `</html>`.
        let ends = html.find("</body>").zip(html.find("</html>")).is_some_and(|(body, page)| body < page);
        assert!(html.starts_with("<!DOCTYPE html>") && ends, "{accept}: {html}");
        if !encoding.is_empty() {
            assert!(bytes.len() * 3 < html.len() * 2, "{accept}: {} bytes for a {}-byte page", bytes.len(), html.len());
        }
        decoded.push(html.len());
    }
    // Each page has its own CSP nonce, of a fixed length: the same page, whatever the encoding.
    assert!(decoded.windows(2).all(|w| w[0] == w[1]), "pages differ by encoding: {decoded:?}");

    let agent = app.agent_token("bundle-test").await;
    let run = sample_run("node-a");
    let (status, _) = post(&app, Some(&agent), "/api/v1/runs", serde_json::to_string(&run).unwrap()).await;
    assert!(status.is_success(), "upload: {status}");
    let viewer = app.user_token(Role::Viewer).await;
    let url = app.url(&format!("/api/v1/runs/{}", run.run_id));
    let plain = app.http.get(&url).bearer_auth(&viewer).send().await.unwrap().text().await.unwrap();
    assert!(plain.len() > 1024, "the run's JSON is too small to test compression: {} bytes", plain.len());
    let gz = app.http.get(&url).bearer_auth(&viewer).header(ACCEPT_ENCODING, "gzip").send().await.unwrap();
    assert_eq!(header(&gz, CONTENT_ENCODING), "gzip");
    let json: serde_json::Value = serde_json::from_str(&decode("gzip", &gz.bytes().await.unwrap())).unwrap();
    assert_eq!(json, serde_json::from_str::<serde_json::Value>(&plain).unwrap());

    // Small answers go as they are.
    let me =
        app.http.get(app.url("/api/v1/me")).bearer_auth(&viewer).header(ACCEPT_ENCODING, "br").send().await.unwrap();
    assert_eq!(me.status(), StatusCode::OK);
    assert_eq!(header(&me, CONTENT_ENCODING), "", "a small answer was compressed");
    // HEAD says what GET would send.
    let head = app.http.head(app.url("/login")).header(ACCEPT_ENCODING, "br").send().await.unwrap();
    assert_eq!(head.status(), StatusCode::OK);
    assert_eq!(header(&head, CONTENT_ENCODING), "br");
    app.stop().await;
    db.drop_database().await;
}
