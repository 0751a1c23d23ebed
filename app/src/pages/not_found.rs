//! Pages with no data of their own.

use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NotFound() -> impl IntoView {
    view! {
        <Title text="Not found · Headroom"/>
        <h1>"Page not found"</h1>
        <p><a href="/fleet">"Back to the fleet"</a></p>
    }
}
