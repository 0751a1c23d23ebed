//! What travels: the runs agents upload, the views the server serves, the typed measurement
//! names, and the validation every upload passes.

pub mod measured;
pub mod run;
pub mod validate;
pub mod view;
