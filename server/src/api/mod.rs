//! The HTTP API, one module per resource. Every route and the role it needs, at a glance:
//!
//! | route | who |
//! | --- | --- |
//! | `POST /api/v1/runs` | agent token |
//! | `GET /api/v1/runs`, `GET /api/v1/runs/{id}`, `GET /api/v1/nodes`, `GET /api/v1/me` | viewer |
//! | `GET /api/v1/scenarios`, `GET /api/v1/scenarios/{id}` | viewer |
//! | `POST /api/v1/scenarios` | planner |
//! | `GET /api/v1/prices`, `GET /api/v1/prices/versions` | viewer |
//! | `POST /api/v1/prices` (CSV) | finance |
//! | `POST /api/v1/reports`, `GET /api/v1/reports`, `GET /api/v1/reports/{id}[.csv|.xlsx|.parquet]` | finance |
//! | `POST /api/v1/model/*` (amortization, break-even, replicas, right-size, memory-fit, transport, uncertainty) | planner |
//! | `GET /api/v1/agents` | admin |
//! | `POST /login`, `POST /logout` | anyone |

pub mod agents;
pub mod model;
pub mod nodes;
pub mod prices;
pub mod reports;
pub mod runs;
pub mod scenarios;
pub mod session;

use axum::Router;

use crate::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .merge(runs::router())
        .merge(nodes::router())
        .merge(agents::router())
        .merge(model::router())
        .merge(prices::router())
        .merge(reports::router())
        .merge(scenarios::router())
        .merge(session::router())
}
