//! One module per page, named after its path (`/right-sizing` is `right_sizing`).

pub mod admin;
pub mod alerts;
pub mod budgets;
pub mod compare;
pub mod fleet;
pub mod llm;
pub mod login;
pub mod not_found;
pub mod planner;
pub mod reports;
pub mod right_sizing;
pub mod run;
pub mod scenarios;
pub mod transport;
