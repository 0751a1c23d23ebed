//! Headroom's pages. The server renders them (`ssr`); the browser hydrates them (`hydrate`).
#![recursion_limit = "512"]

// The server and the browser bundle must both erase view types or both not: a bundle built one
// way panics hydrating a page rendered the other way. `.cargo/config.toml` sets
// `--cfg erase_components` for every build; a build that lost it (a `RUSTFLAGS` of its own
// replaces it) stops here. Typed views on both sides, as the README's size comparison built
// them, take `RUSTFLAGS="--cfg headroom_typed_views"` for the server and the bundle alike.
#[cfg(not(any(erase_components, headroom_typed_views)))]
compile_error!(
    "build with `--cfg erase_components`, as .cargo/config.toml sets it: a RUSTFLAGS of your own replaces \
     that, so add `--cfg erase_components` to it (or `--cfg headroom_typed_views` for typed views on both sides)"
);

pub mod components;
pub mod data;
pub mod pages;

#[cfg(feature = "ssr")]
pub mod backend;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Title, provide_meta_context};
use leptos_router::components::{A, Redirect, Route, Router, Routes};
use leptos_router::path;

/// The stylesheet and bundle names the build writes under `/pkg`.
pub const OUTPUT_NAME: &str = "headroom";

/// The HTML document around the app, rendered on the server. The bundle's files are named
/// by `options.output_name`: `headroom` in a dev build, `headroom.<hash>` in a release one.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    let stylesheet = format!("/pkg/{}.css", options.output_name);
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" type="image/svg+xml" href="/pkg/favicon.svg"/>
                <link id="headroom" rel="stylesheet" href=stylesheet/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Title text="Headroom"/>
        <Router>
            <Routes fallback=|| view! { <Shell><pages::not_found::NotFound/></Shell> }>
                <Route path=path!("/login") view=pages::login::LoginPage/>
                <Route path=path!("/") view=|| view! { <Redirect path="/fleet"/> }/>
                <Route path=path!("/fleet") view=|| view! { <Shell><pages::fleet::FleetPage/></Shell> }/>
                <Route path=path!("/planner") view=|| view! { <Shell><pages::planner::PlannerPage/></Shell> }/>
                <Route path=path!("/right-sizing") view=|| view! { <Shell><pages::right_sizing::RightSizingPage/></Shell> }/>
                <Route path=path!("/llm") view=|| view! { <Shell><pages::llm::LlmPage/></Shell> }/>
                <Route path=path!("/transport") view=|| view! { <Shell><pages::transport::TransportPage/></Shell> }/>
                <Route path=path!("/runs/:id") view=|| view! { <Shell><pages::run::RunPageView/></Shell> }/>
                <Route path=path!("/scenarios") view=|| view! { <Shell><pages::scenarios::ScenariosPage/></Shell> }/>
                <Route path=path!("/scenarios/compare") view=|| view! { <Shell><pages::compare::ComparePage/></Shell> }/>
                <Route path=path!("/alerts") view=|| view! { <Shell><pages::alerts::AlertsPage/></Shell> }/>
                <Route path=path!("/reports") view=|| view! { <Shell><pages::reports::ReportsPage/></Shell> }/>
                <Route path=path!("/budgets") view=|| view! { <Shell><pages::budgets::BudgetsPage/></Shell> }/>
                <Route path=path!("/admin") view=|| view! { <Shell><pages::admin::AdminPage/></Shell> }/>
            </Routes>
        </Router>
    }
}

/// Navigation around every signed-in page.
#[component]
fn Shell(children: Children) -> impl IntoView {
    let links = [
        ("/fleet", "Fleet"),
        ("/planner", "Planner"),
        ("/right-sizing", "Right-sizing"),
        ("/llm", "LLM serving"),
        ("/transport", "Transport"),
        ("/scenarios", "Scenarios"),
        ("/reports", "Reports"),
        ("/budgets", "Budgets"),
        ("/alerts", "Alerts"),
        ("/admin", "Admin"),
    ];
    view! {
        <a class="skip" href="#main">"Skip to content"</a>
        <header class="top">
            <a class="brand" href="/fleet">"Headroom"</a>
            <nav>
                {links.into_iter().map(|(href, label)| view! { <A href=href>{label}</A> }).collect_view()}
            </nav>
            <form method="post" action="/logout" class="logout">
                <button type="submit">"Sign out"</button>
            </form>
        </header>
        <main id="main" tabindex="-1">{children()}</main>
    }
}

#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(App);
    // Lets browser tests and people tell a hydrated page from a server-rendered one.
    if let Some(body) = document().body() {
        let _ = body.set_attribute("data-hydrated", "true");
    }
}

/// Milliseconds since the Unix epoch by the clock of wherever the page runs.
pub fn now_ms() -> i64 {
    #[cfg(feature = "hydrate")]
    let now_ms = js_sys::Date::now() as i64;
    #[cfg(not(feature = "hydrate"))]
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    now_ms
}

/// Today (UTC) by the clock of wherever the page runs.
pub fn today() -> model::calendar::Date {
    model::calendar::Date::from_unix_ms(now_ms())
}
