//! People, their API tokens and the agents' tokens, managed by admins from the Admin page or
//! the API: add a person (with a password they are given, or one made up and shown once),
//! change a role, remove a person, issue and revoke API tokens, issue or replace an agent's
//! token. Every change is logged with who made it. A change that would leave no admin is
//! refused, so somebody can always manage people. The page calls the same functions.

use app::data::{AgentView, CreatedToken, CreatedUser, PeopleView, PersonView, TokenView};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::header::CACHE_CONTROL;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use model::FieldError;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::admin;
use crate::auth::{self, Caller, Needs, Role, need};
use crate::error::ApiError;
use crate::json::ApiJson;
use crate::store::{NameTaken, PersonChange, PersonRecord, Store, could_be_id};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_users, create_user_json))
        .routes(routes!(set_role_json, delete_user_json))
        .routes(routes!(list_tokens, create_token_json))
        .routes(routes!(revoke_token_json))
}

/// A person to add.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewUser {
    /// 1 to 64 letters, digits, `.`, `_`, `-` and `@`, starting with a letter or digit.
    pub name: String,
    /// `viewer`, `planner`, `finance` or `admin`.
    pub role: String,
    /// 8 to 256 characters; leave it out to have one made up (answered once).
    pub password: Option<String>,
}

/// The password never reaches a log line, even by `{:?}`.
impl std::fmt::Debug for NewUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let password = self.password.as_ref().map(|_| "<hidden>");
        f.debug_struct("NewUser")
            .field("name", &self.name)
            .field("role", &self.role)
            .field("password", &password)
            .finish()
    }
}

/// A person's new role.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRole {
    pub role: String,
}

/// An API token to issue.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// The id of the person it acts as (from `GET /api/v1/users`).
    pub user_id: String,
    /// 1 to 3650; leave it out for a token that never expires.
    pub expires_in_days: Option<u32>,
}

fn role_of(text: &str) -> Result<Role, FieldError> {
    Role::parse(text.trim())
        .ok_or_else(|| FieldError::new("role", "must be one of viewer, planner, finance, admin".to_string()))
}

/// An id the store cannot have handed out names nothing, is not looked up and is not echoed.
fn checked_id<'a>(what: &str, id: &'a str) -> Result<&'a str, ApiError> {
    if !could_be_id(id) {
        return Err(ApiError::NotFound(format!("no {what} has an id like that")));
    }
    Ok(id)
}

fn person(record: PersonRecord) -> PersonView {
    PersonView {
        id: record.id,
        name: record.name,
        role: record.role,
        created_at_ms: record.created_at_ms,
        live_tokens: record.live_tokens,
    }
}

async fn person_by_id(store: &Store, id: &str) -> Result<PersonView, ApiError> {
    let people = store.list_people().await?;
    people.into_iter().find(|p| p.id == id).map(person).ok_or_else(|| no_user(id))
}

fn no_user(id: &str) -> ApiError {
    ApiError::NotFound(format!("no user with id {id}"))
}

fn last_admin() -> ApiError {
    ApiError::Conflict("that would leave no admin: make someone else admin first".into())
}

/// Everyone, their API tokens and the agents (role admin).
pub async fn page(store: &Store, caller: &Caller) -> Result<PeopleView, ApiError> {
    caller.require(Role::Admin)?;
    let people = store.list_people().await?.into_iter().map(person).collect();
    let tokens = tokens(store).await?;
    let agents = store
        .list_agents()
        .await?
        .into_iter()
        .map(|a| AgentView {
            name: a.name,
            scope: a.scope,
            created_at_ms: a.created_at_ms,
            last_seen_ms: a.last_seen_ms,
        })
        .collect();
    let you = caller.user_id().unwrap_or_default().to_string();
    Ok(PeopleView { people, tokens, agents, you, now_ms: crate::store::now_ms() })
}

/// [`page`] for an admin; `None` for anyone else signed in (the Admin page then shows only
/// the price catalog).
pub async fn page_if_admin(store: &Store, caller: &Caller) -> Result<Option<PeopleView>, ApiError> {
    caller.require(Role::Viewer)?;
    if caller.require(Role::Admin).is_err() {
        return Ok(None);
    }
    page(store, caller).await.map(Some)
}

async fn tokens(store: &Store) -> Result<Vec<TokenView>, ApiError> {
    Ok(store
        .list_api_tokens()
        .await?
        .into_iter()
        .map(|t| TokenView {
            id: t.id,
            user_name: t.user_name,
            created_at_ms: t.created_at_ms,
            expires_at_ms: t.expires_at_ms,
            revoked_at_ms: t.revoked_at_ms,
        })
        .collect())
}

/// Adds a person (role admin).
pub async fn create_user(store: &Store, caller: &Caller, new: NewUser) -> Result<CreatedUser, ApiError> {
    let (by, _) = caller.require(Role::Admin)?;
    let role = role_of(&new.role)?;
    let name = admin::checked_name("name", &new.name)?;
    let generated = new.password.is_none();
    let (id, password) = match admin::add_user(store, &name, role, new.password).await {
        Ok(added) => added,
        Err(err) => {
            return Err(match (err.downcast_ref::<FieldError>(), err.downcast_ref::<NameTaken>()) {
                (Some(field), _) => field.clone().into(),
                (_, Some(taken)) => ApiError::Conflict(taken.to_string()),
                _ => err.into(),
            });
        }
    };
    tracing::info!(user = name, role = role.as_str(), by, "user created");
    // Answered from what is in hand: a failed read now must not lose a password already set.
    let person =
        PersonView { id, name, role: role.as_str().to_string(), created_at_ms: crate::store::now_ms(), live_tokens: 0 };
    Ok(CreatedUser { person, generated_password: generated.then_some(password) })
}

/// Gives a person another role (role admin); refused when it would leave no admin.
pub async fn set_role(store: &Store, caller: &Caller, id: &str, role: &str) -> Result<PersonView, ApiError> {
    let (by, _) = caller.require(Role::Admin)?;
    let id = checked_id("user", id)?;
    let role = role_of(role)?;
    match store.set_role(id, role).await? {
        PersonChange::Done => {}
        PersonChange::NoSuchUser => return Err(no_user(id)),
        PersonChange::LastAdmin => return Err(last_admin()),
    }
    tracing::info!(user = id, role = role.as_str(), by, "role changed");
    person_by_id(store, id).await
}

/// Removes a person with their sessions and tokens (role admin); refused for the last admin.
pub async fn delete_user(store: &Store, caller: &Caller, id: &str) -> Result<(), ApiError> {
    let (by, _) = caller.require(Role::Admin)?;
    let id = checked_id("user", id)?;
    match store.delete_user(id).await? {
        PersonChange::Done => {}
        PersonChange::NoSuchUser => return Err(no_user(id)),
        PersonChange::LastAdmin => return Err(last_admin()),
    }
    tracing::info!(user = id, by, "user removed");
    Ok(())
}

/// Issues an API token acting as a person (role admin); its secret is answered once.
pub async fn create_token(store: &Store, caller: &Caller, new: NewToken) -> Result<CreatedToken, ApiError> {
    let (by, _) = caller.require(Role::Admin)?;
    let user_id =
        checked_id("user", &new.user_id).map_err(|_| FieldError::new("user_id", "is not the id of a user"))?;
    let user = store.user_by_id(user_id).await?.ok_or_else(|| FieldError::new("user_id", "is not the id of a user"))?;
    let (secret, id, expires_at_ms) = admin::api_token_for(store, &user.id, new.expires_in_days).await?;
    tracing::info!(token = id, user = user.name.as_str(), by, "API token created");
    Ok(CreatedToken { id, acts_as: user.name, secret, expires_at_ms, replaced: false })
}

/// Revokes an API token (role admin): it stops working at once.
pub async fn revoke_token(store: &Store, caller: &Caller, id: &str) -> Result<(), ApiError> {
    let (by, _) = caller.require(Role::Admin)?;
    let id = checked_id("token", id)?;
    if !store.revoke_api_token(id).await? {
        return Err(ApiError::NotFound(format!("no unrevoked token with id {id}")));
    }
    tracing::info!(token = id, by, "API token revoked");
    Ok(())
}

/// An agent to issue a token for.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewAgent {
    /// 1 to 64 letters, digits, `.`, `_`, `-` and `@`: usually the node's name.
    pub name: String,
    /// Replace the token of an agent with this name (its old token stops working). Without
    /// it, a name in use is refused.
    #[serde(default)]
    pub replace: bool,
}

/// Issues an agent's ingest-only token, or with `replace` a new one for an existing agent
/// (role admin).
pub async fn create_agent(store: &Store, caller: &Caller, new: NewAgent) -> Result<CreatedToken, ApiError> {
    let (by, _) = caller.require(Role::Admin)?;
    let name = admin::checked_name("name", &new.name)?;
    let exists = store.list_agents().await?.iter().any(|a| a.name == name);
    let secret = auth::new_token("hr_agent_");
    let hash = auth::hash_token(&secret);
    if new.replace {
        store.upsert_agent(&name, &hash).await?;
    } else if !store.insert_agent(&name, &hash).await? {
        // Taken, by an earlier agent or by one issued a moment ago: never replaced unasked.
        return Err(ApiError::Conflict(format!(
            "an agent named '{name}' exists; replace its token (the old one stops working) or pick another name"
        )));
    }
    let replaced = new.replace && exists;
    tracing::info!(agent = name, replaced, by, "agent token issued");
    Ok(CreatedToken { id: name.clone(), acts_as: name, secret, expires_at_ms: None, replaced })
}

/// An answer that carries a secret: never kept by a cache or a browser's history.
pub fn secret_response(status: StatusCode, body: impl serde::Serialize) -> Response {
    let mut response = (status, Json(body)).into_response();
    response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Everyone who can sign in.
#[utoipa::path(get, path = "/api/v1/users", tag = "admin",
    responses((status = 200, description = "id, name, role, created_at_ms, live_tokens of each"), (status = 401), (status = 403)))]
pub async fn list_users(
    State(state): State<AppState>,
    caller: Needs<need::Admin>,
) -> Result<Json<Vec<PersonView>>, ApiError> {
    Ok(Json(page(&state.store, &caller).await?.people))
}

/// Adds a person.
#[utoipa::path(post, path = "/api/v1/users", tag = "admin", request_body = NewUser,
    responses((status = 201, description = "added; `generated_password` holds the password when none was given (shown once)"),
        (status = 400, description = "malformed JSON"), (status = 401), (status = 403),
        (status = 409, description = "the name is taken"),
        (status = 422, description = "a field is wrong; `field` names it")))]
pub async fn create_user_json(
    State(state): State<AppState>,
    caller: Needs<need::Admin>,
    ApiJson(new): ApiJson<NewUser>,
) -> Result<Response, ApiError> {
    Ok(secret_response(StatusCode::CREATED, create_user(&state.store, &caller, new).await?))
}

/// Changes a person's role; it applies to their next request, by session or token.
#[utoipa::path(patch, path = "/api/v1/users/{id}", tag = "admin", request_body = NewRole,
    responses((status = 200, description = "changed; the body is the person"),
        (status = 400, description = "malformed JSON"), (status = 401), (status = 403), (status = 404),
        (status = 409, description = "it would leave no admin"),
        (status = 422, description = "not a role")))]
pub async fn set_role_json(
    State(state): State<AppState>,
    caller: Needs<need::Admin>,
    Path(id): Path<String>,
    ApiJson(NewRole { role }): ApiJson<NewRole>,
) -> Result<Json<PersonView>, ApiError> {
    Ok(Json(set_role(&state.store, &caller, &id, &role).await?))
}

/// Removes a person, their sessions and API tokens.
#[utoipa::path(delete, path = "/api/v1/users/{id}", tag = "admin",
    responses((status = 204, description = "removed"), (status = 401), (status = 403), (status = 404),
        (status = 409, description = "they are the last admin")))]
pub async fn delete_user_json(
    State(state): State<AppState>,
    caller: Needs<need::Admin>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    delete_user(&state.store, &caller, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Every API token, revoked and expired ones included (never the secrets).
#[utoipa::path(get, path = "/api/v1/tokens", tag = "admin",
    responses((status = 200, description = "id, user_name, created_at_ms, expires_at_ms, revoked_at_ms of each"), (status = 401), (status = 403)))]
pub async fn list_tokens(
    State(state): State<AppState>,
    _caller: Needs<need::Admin>,
) -> Result<Json<Vec<TokenView>>, ApiError> {
    Ok(Json(tokens(&state.store).await?))
}

/// Issues an API token acting as a person.
#[utoipa::path(post, path = "/api/v1/tokens", tag = "admin", request_body = NewToken,
    responses((status = 201, description = "issued; `secret` is the token, shown once"),
        (status = 400, description = "malformed JSON"), (status = 401), (status = 403),
        (status = 422, description = "no such user, or the expiry is out of range; `field` names it")))]
pub async fn create_token_json(
    State(state): State<AppState>,
    caller: Needs<need::Admin>,
    ApiJson(new): ApiJson<NewToken>,
) -> Result<Response, ApiError> {
    Ok(secret_response(StatusCode::CREATED, create_token(&state.store, &caller, new).await?))
}

/// Revokes an API token.
#[utoipa::path(delete, path = "/api/v1/tokens/{id}", tag = "admin",
    responses((status = 204, description = "revoked"), (status = 401), (status = 403),
        (status = 404, description = "no such token, or it is revoked already")))]
pub async fn revoke_token_json(
    State(state): State<AppState>,
    caller: Needs<need::Admin>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    revoke_token(&state.store, &caller, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
