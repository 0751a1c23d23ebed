//! The HTTP API, one module per resource. Every route and the role it needs, at a glance:
//!
//! | route | who |
//! | --- | --- |
//! | `POST /api/v1/runs` | agent token |
//! | `GET /api/v1/runs`, `GET /api/v1/runs/{id}`, `GET /api/v1/nodes`, `GET /api/v1/me` | viewer |
//! | `GET /api/v1/scenarios`, `GET /api/v1/scenarios/{id}` | viewer |
//! | `GET /api/v1/alerts`, `GET /api/v1/alerts/{id}` | viewer |
//! | `PATCH /api/v1/alerts/{id}` (acknowledge, resolve, reopen) | planner |
//! | `POST /api/v1/scenarios`, `PATCH /api/v1/scenarios/{id}` (rename), `DELETE /api/v1/scenarios/{id}` | planner |
//! | `GET /api/v1/prices`, `GET /api/v1/prices/versions` | viewer |
//! | `POST /api/v1/prices` (CSV) | finance |
//! | `GET /api/v1/grid-intensity`, `GET /api/v1/grid-intensity/versions` | viewer |
//! | `POST /api/v1/grid-intensity` (CSV) | finance |
//! | `POST /api/v1/reports`, `GET /api/v1/reports`, `GET /api/v1/reports/{id}[.csv|.xlsx|.parquet]` | finance |
//! | `GET /api/v1/reports/{id}/chargeback[.csv|.xlsx|.parquet]`, `GET /api/v1/reports/{id}/forecast[…]` | finance |
//! | `GET`/`PUT /api/v1/budgets`, `DELETE /api/v1/budgets/{id}` | finance |
//! | `POST /api/v1/model/*` (amortization, break-even, replicas, right-size, memory-fit, transport, uncertainty, purchase, owned-cost) | planner |
//! | `GET /api/v1/agents`, `POST /api/v1/agents` (issue or replace an agent token) | admin |
//! | `GET`/`POST /api/v1/users`, `PATCH`/`DELETE /api/v1/users/{id}`, `GET`/`POST /api/v1/tokens`, `DELETE /api/v1/tokens/{id}` | admin |
//! | `POST /login`, `POST /logout` | anyone |

pub mod agents;
pub mod alerts;
pub mod budgets;
pub mod grid;
pub mod model;
pub mod nodes;
pub mod people;
pub mod prices;
pub mod reports;
pub mod runs;
pub mod scenarios;
pub mod session;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;

use crate::AppState;
use crate::auth::{self, Caller};
use crate::error::ApiError;

/// Every API route with its OpenAPI description, registered together.
pub fn router(state: &AppState) -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(runs::router())
        .merge(nodes::router())
        .merge(agents::router())
        .merge(alerts::router())
        .merge(budgets::router())
        .merge(grid::router())
        .merge(people::router())
        .merge(model::router())
        .merge(prices::router())
        .merge(reports::router())
        .merge(scenarios::router())
        .route_layer(middleware::from_fn_with_state(state.clone(), identify))
        .merge(session::router())
}

/// Establishes the caller once, from the headers, before any body is read: a write without
/// credentials is refused without reading its body. Handlers find the caller it stored.
async fn identify(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let caller = match auth::authenticate(&state.store, request.headers()).await {
        Ok(principal) => Caller(principal),
        Err(err) => return err.into_response(),
    };
    let reads = matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if caller.0.is_none() && !reads {
        return ApiError::Unauthorized("sign in, or send an API or agent token, before sending a body".into())
            .into_response();
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}
