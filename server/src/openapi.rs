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
    paths(api::runs::create, api::runs::list, api::runs::get_one, api::nodes::list, api::agents::list, api::agents::create_json, api::session::me,
        api::people::list_users, api::people::create_user_json, api::people::set_role_json, api::people::delete_user_json,
        api::people::list_tokens, api::people::create_token_json, api::people::revoke_token_json,
        api::model::amortization, api::model::break_even, api::model::replicas, api::model::right_size,
        api::model::memory_fit, api::model::transport, api::model::uncertainty,
        api::scenarios::create_json, api::scenarios::list, api::scenarios::get_one, api::scenarios::rename_json,
        api::scenarios::delete_json,
        api::prices::export, api::prices::import, api::prices::versions,
        api::reports::create, api::reports::list, api::reports::get_one),
    modifiers(&BearerAuth, &ModelExamples)
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

pub fn router() -> Router<crate::AppState> {
    Router::<AppState>::new().route("/api/openapi.json", get(|| async { Json(ApiDoc::openapi()) }))
}
