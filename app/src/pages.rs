//! Pages whose content later issues build; they say so rather than pretend.

use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn Planned(title: &'static str, issue: u32) -> impl IntoView {
    view! {
        <Title text=format!("{title} · Headroom")/>
        <h1>{title}</h1>
        <p class="notice">{format!("Not built yet: this page arrives with issue #{issue}.")}</p>
    }
}

#[component]
pub fn NotFound() -> impl IntoView {
    view! {
        <Title text="Not found · Headroom"/>
        <h1>"Page not found"</h1>
        <p><a href="/fleet">"Back to the fleet"</a></p>
    }
}
