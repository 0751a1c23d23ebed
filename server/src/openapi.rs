//! `/api/openapi.json`: the HTTP API described from the handlers themselves.

use axum::routing::get;
use axum::{Json, Router};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::AppState;
use crate::api;

#[derive(OpenApi)]
#[openapi(
    info(title = "Headroom API", description = "Measurements, nodes and runs. People sign in (cookie) or send an API token; agents send an ingest-only token. gRPC ingest: headroom.v1.Ingest/UploadRun on the same port."),
    paths(api::runs::create, api::runs::list, api::runs::get_one, api::nodes::list, api::agents::list, api::session::me),
    modifiers(&BearerAuth)
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

pub fn router() -> Router<crate::AppState> {
    Router::<AppState>::new().route("/api/openapi.json", get(|| async { Json(ApiDoc::openapi()) }))
}
