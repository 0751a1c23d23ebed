//! Who is calling: a person (session cookie or API token) with a role, or an agent with an
//! ingest-only token. Secrets are random, shown once, and stored as SHA-256 hashes; passwords
//! as argon2 hashes.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, COOKIE};
use axum::http::request::Parts;
use sha2::{Digest, Sha256};

use crate::AppState;
use crate::error::ApiError;
use crate::store::{AgentRecord, Store, UserRecord};

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "headroom_session";

/// A person's role; each role may do everything the roles before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Viewer,
    Planner,
    Finance,
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Planner, Role::Finance, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Planner => "planner",
            Role::Finance => "finance",
            Role::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == text)
    }
}

/// An authenticated caller.
#[derive(Debug, Clone)]
pub enum Principal {
    User { id: String, name: String, role: Role },
    Agent(AgentRecord),
}

impl From<UserRecord> for Principal {
    fn from(user: UserRecord) -> Self {
        Principal::User { role: user.role(), id: user.id, name: user.name }
    }
}

/// The caller of a request, if any; handlers state the role they need with [`Caller::require`].
#[derive(Debug, Clone)]
pub struct Caller(pub Option<Principal>);

impl Caller {
    /// The signed-in person's user id, if the caller is a person.
    pub fn user_id(&self) -> Option<&str> {
        match &self.0 {
            Some(Principal::User { id, .. }) => Some(id),
            _ => None,
        }
    }

    /// A person with at least `role`; agents and anonymous callers are refused.
    pub fn require(&self, role: Role) -> Result<(&str, Role), ApiError> {
        match &self.0 {
            None => Err(ApiError::Unauthorized("sign in or send an API token".into())),
            Some(Principal::Agent(agent)) => Err(ApiError::Forbidden(format!(
                "agent token '{}' may only ingest runs; this needs role {}",
                agent.name,
                role.as_str()
            ))),
            Some(Principal::User { name, role: have, .. }) if *have < role => Err(ApiError::Forbidden(format!(
                "user '{name}' has role {}; this needs role {} or above",
                have.as_str(),
                role.as_str()
            ))),
            Some(Principal::User { name, role: have, .. }) => Ok((name, *have)),
        }
    }

    /// An agent with the ingest scope.
    pub fn require_agent(&self) -> Result<&AgentRecord, ApiError> {
        match &self.0 {
            None => Err(ApiError::Unauthorized("send the agent's token as 'Authorization: Bearer …'".into())),
            Some(Principal::User { name, .. }) => {
                Err(ApiError::Forbidden(format!("user '{name}' cannot ingest runs; use an agent token")))
            }
            Some(Principal::Agent(agent)) => Ok(agent),
        }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if let Some(caller) = parts.extensions.get::<Caller>() {
            return Ok(caller.clone());
        }
        authenticate(&state.store, &parts.headers).await.map(Caller)
    }
}

/// The roles a route can need, as types, for [`Needs`].
pub mod need {
    use super::Role;

    /// A role as a type.
    pub trait Needed: Send + Sync + 'static {
        const ROLE: Role;
    }
    macro_rules! roles {
        ($($name:ident),+) => {$(
            #[doc = concat!("Role ", stringify!($name), " or above.")]
            pub struct $name;
            impl Needed for $name {
                const ROLE: Role = Role::$name;
            }
        )+};
    }
    roles!(Viewer, Planner, Finance, Admin);
}

/// A caller holding at least `R`'s role. As a handler argument it refuses (401, 403) from the
/// headers alone, before the body extractor that follows it reads a byte: so a refused caller
/// always gets 401/403, never a 400/413/415/422 about a body it may not send.
pub struct Needs<R>(pub Caller, std::marker::PhantomData<R>);

impl<R> std::ops::Deref for Needs<R> {
    type Target = Caller;
    fn deref(&self) -> &Caller {
        &self.0
    }
}

impl<R: need::Needed> FromRequestParts<AppState> for Needs<R> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        caller.require(R::ROLE)?;
        Ok(Needs(caller, std::marker::PhantomData))
    }
}

/// An agent with the ingest scope, established from the headers before the body is read, so
/// an anonymous or wrong caller costs no body.
#[derive(Debug, Clone)]
pub struct AgentCaller(pub AgentRecord);

impl FromRequestParts<AppState> for AgentCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        caller.require_agent().cloned().map(AgentCaller)
    }
}

/// Resolves the bearer token, or else the session cookie. A token that is sent but unknown
/// is an error rather than an anonymous call.
pub async fn authenticate(store: &Store, headers: &HeaderMap) -> Result<Option<Principal>, ApiError> {
    if let Some(value) = headers.get(AUTHORIZATION) {
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ApiError::Unauthorized("Authorization header must be 'Bearer <token>'".into()))?;
        return bearer(store, token).await.map(Some);
    }
    let Some(session) = session_cookie(headers) else { return Ok(None) };
    Ok(store.user_by_session(&hash_token(&session)).await?.map(Principal::from))
}

/// The principal behind a bearer token (agent or API token).
pub async fn bearer(store: &Store, token: &str) -> Result<Principal, ApiError> {
    let hash = hash_token(token);
    if let Some(agent) = store.agent_by_token(&hash).await? {
        return Ok(Principal::Agent(agent));
    }
    if let Some(user) = store.user_by_api_token(&hash).await? {
        return Ok(user.into());
    }
    Err(ApiError::Unauthorized("unknown or revoked token".into()))
}

/// The session cookie's value, if the request carries one.
pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.to_string())
}

/// A new random secret with a readable prefix, e.g. `hr_agent_3f…`.
pub fn new_token(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    format!("{prefix}{}", hex::encode(bytes))
}

/// How a token is stored: tokens are high-entropy, so a fast hash suffices.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

pub fn hash_password(password: &str) -> anyhow::Result<String> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| anyhow::anyhow!("random source failed: {e}"))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map_err(|e| anyhow::anyhow!("cannot hash password: {e}"))?
        .to_string())
}

pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
}

/// Argon2 work (sign-in checks and new passwords) runs on the blocking pool, at most a few at a
/// time, so that it never stalls the async runtime that serves everything else.
async fn off_runtime<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> anyhow::Result<T> {
    static HASHING: crate::blocking::Limited = crate::blocking::Limited::new();
    HASHING.run(work).await
}

/// Checks `password` against `hash` (or, for an unknown user, against a dummy hash, so the
/// answer takes as long either way), off the async runtime.
pub async fn verify_password_off_runtime(password: String, hash: Option<String>) -> anyhow::Result<bool> {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    off_runtime(move || match hash {
        Some(hash) => verify_password(&password, &hash),
        None => {
            let dummy = DUMMY.get_or_init(|| hash_password("no such user").unwrap_or_default());
            verify_password(&password, dummy);
            false
        }
    })
    .await
}

/// [`hash_password`], off the async runtime.
pub async fn hash_password_off_runtime(password: String) -> anyhow::Result<String> {
    off_runtime(move || hash_password(&password)).await?
}
