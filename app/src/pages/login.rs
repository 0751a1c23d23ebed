//! The sign-in page: a plain form, so it works before the bundle loads.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_location, use_query_map};

#[component]
pub fn LoginPage() -> impl IntoView {
    let query = use_query_map();
    let error = move || {
        query.read().get("error").map(|code| match code.as_str() {
            "missing" => "Enter a user name and a password.",
            "throttled" => "Too many failed sign-ins: wait a little and try again.",
            _ => "Unknown user name or wrong password.",
        })
    };
    // `next` is read from the raw query and decoded once (the query map decodes values twice,
    // which would turn an encoded `%2C` in the link back into `,`), and written as an attribute
    // so it is there before the bundle hydrates. The server checks it again after sign-in.
    let raw = use_location().search.get_untracked();
    let next = crate::components::form::from_query(raw.trim_start_matches('?'))
        .ok()
        .and_then(|q| q.get("next").cloned())
        .unwrap_or_else(|| "/fleet".to_string());
    view! {
        <Title text="Sign in · Headroom"/>
        <main class="login">
            <h1>"Headroom"</h1>
            <p class="lede">"What your inference performance costs, measured on your own nodes."</p>
            <form method="post" action="/login" class="card">
                <label>"User name" <input type="text" name="name" autocomplete="username" required/></label>
                <label>"Password" <input type="password" name="password" autocomplete="current-password" required/></label>
                <input type="hidden" name="next" value=next/>
                {move || error().map(|e| view! { <p class="error" role="alert">{e}</p> })}
                <button type="submit">"Sign in"</button>
            </form>
        </main>
    }
}
