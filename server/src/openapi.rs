//! `/api/openapi.json`: the HTTP API described from the handlers themselves.

use std::sync::Arc;

use axum::routing::get;
use axum::{Json, Router};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;

use crate::AppState;
use crate::api;

/// What the document says of the API as a whole; its paths come from the routes themselves
/// (see [`router`]), so a route cannot be served undocumented or documented unserved.
#[derive(OpenApi)]
#[openapi(
    info(title = "Headroom API", description = "Measurements, nodes and runs. People sign in (cookie) or send an API token; agents send an ingest-only token. gRPC ingest: headroom.v1.Ingest/UploadRun on the same port."),
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

/// Puts a worked example on each planning endpoint: the request, and what the model answers.
struct ModelExamples;

impl Modify for ModelExamples {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for (path, request) in api::model::examples() {
            let Some(operation) = openapi.paths.paths.get_mut(path).and_then(|item| item.post.as_mut()) else {
                continue;
            };
            let response = api::model::example_response(path, &request);
            if let Some(content) =
                operation.request_body.as_mut().and_then(|body| body.content.get_mut("application/json"))
            {
                content.example = Some(request);
            }
            if let Some(utoipa::openapi::RefOr::T(ok)) = operation.responses.responses.get_mut("200")
                && let Some(content) = ok.content.get_mut("application/json")
            {
                content.example = response;
            }
        }
    }
}

/// The API's routes and `/api/openapi.json`, the document built from those same routes with a
/// worked example on each planning endpoint.
pub fn router(state: &AppState) -> Router<AppState> {
    let (routes, mut document) =
        OpenApiRouter::with_openapi(ApiDoc::openapi()).merge(api::router(state)).split_for_parts();
    ModelExamples.modify(&mut document);
    let document = Arc::new(document);
    routes.route("/api/openapi.json", get(move || async move { Json(document.as_ref().clone()) }))
}
