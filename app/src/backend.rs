//! What the pages need from the server, provided as context by the server at render time.
//! The app cannot depend on the server crate (the server depends on the app), so the server
//! implements this trait.

use std::sync::Arc;

use futures::future::BoxFuture;
use model::FleetView;

/// The server's side of the pages' data.
pub trait Backend: Send + Sync + 'static {
    /// The Fleet page's data for the caller identified by `headers` (session cookie or token).
    fn fleet(&self, headers: http::HeaderMap) -> BoxFuture<'static, Result<FleetView, String>>;
}

/// The context value the server provides.
#[derive(Clone)]
pub struct BackendHandle(pub Arc<dyn Backend>);
