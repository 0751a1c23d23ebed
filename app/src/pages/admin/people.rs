//! The Admin page's people section, for admins: who can sign in and with which role, the API
//! tokens scripts use, and the agents' ingest tokens. A new password or token is shown once,
//! with what to do with it; nothing here can leave the install without an admin.

use leptos::prelude::*;
use model::format::utc_minute;

use crate::data::{
    CreatedToken, CreatedUser, PeopleView, PersonView, TokenView, create_agent_token, create_api_token, create_user,
    delete_user, people, revoke_api_token, set_user_role,
};
use crate::pages::scenarios::clean;

const ROLES: [(&str, &str); 4] = [
    ("viewer", "Viewer: reads every page"),
    ("planner", "Planner: also saves scenarios and plans"),
    ("finance", "Finance: also prices and reports"),
    ("admin", "Admin: also people and tokens"),
];

/// Days a new API token lives unless the admin says otherwise.
const DEFAULT_TOKEN_DAYS: &str = "90";

type Answer<T> = Result<T, ServerFnError>;

/// What the forms hold, kept above the lists so that a list reloading after a change (another
/// form's, or a revoke) does not wipe what is being typed.
#[derive(Clone, Copy)]
struct Typed {
    user_name: RwSignal<String>,
    user_role: RwSignal<String>,
    user_password: RwSignal<String>,
    /// The id of the person a token is for; empty: the first listed.
    token_user: RwSignal<String>,
    token_days: RwSignal<String>,
    agent_name: RwSignal<String>,
    agent_replace: RwSignal<bool>,
}

impl Typed {
    fn new() -> Self {
        Typed {
            user_name: RwSignal::new(String::new()),
            user_role: RwSignal::new("viewer".into()),
            user_password: RwSignal::new(String::new()),
            token_user: RwSignal::new(String::new()),
            token_days: RwSignal::new(DEFAULT_TOKEN_DAYS.into()),
            agent_name: RwSignal::new(String::new()),
            agent_replace: RwSignal::new(false),
        }
    }
}

#[component]
pub fn People() -> impl IntoView {
    // Every change bumps this, and the lists reload.
    let changes = RwSignal::new(0u32);
    let list = Resource::new(move || changes.get(), |_| people());
    let changed = Callback::new(move |()| changes.update(|n| *n += 1));
    // The forms' actions live here, above the lists, so a secret stays on screen while the
    // lists reload around it.
    let add_user = Action::new(|(name, role, password): &(String, String, String)| {
        create_user(name.clone(), role.clone(), Some(password.clone()))
    });
    let issue_token = Action::new(|(user, days): &(String, Option<u32>)| create_api_token(user.clone(), *days));
    let issue_agent = Action::new(|(name, replace): &(String, bool)| create_agent_token(name.clone(), *replace));
    let typed = Typed::new();
    // A form that did its work empties, ready for the next (its secret stays shown).
    Effect::new(move || {
        if matches!(add_user.value().get(), Some(Ok(_))) {
            typed.user_name.set(String::new());
            typed.user_password.set(String::new());
        }
    });
    Effect::new(move || {
        if matches!(issue_agent.value().get(), Some(Ok(_))) {
            typed.agent_name.set(String::new());
            typed.agent_replace.set(false);
        }
    });
    // Reload the lists once per form that did its work: each action's version counts its
    // answers, so a later failure (whose value replaces the earlier success) reloads nothing.
    let seen = StoredValue::new([0usize; 3]);
    Effect::new(move || {
        let answers = [
            (add_user.version().get(), matches!(add_user.value().get(), Some(Ok(_)))),
            (issue_token.version().get(), matches!(issue_token.value().get(), Some(Ok(_)))),
            (issue_agent.version().get(), matches!(issue_agent.value().get(), Some(Ok(_)))),
        ];
        let mut reload = false;
        seen.update_value(|seen| {
            for (last, (version, ok)) in seen.iter_mut().zip(answers) {
                reload |= version != *last && ok;
                *last = version;
            }
        });
        if reload {
            changed.run(());
        }
    });
    view! {
        <Suspense fallback=|| view! { <p>"Loading people…"</p> }>
            {move || Suspend::new(async move {
                match list.await {
                    Err(err) => view! { <p class="error">{format!("Could not load people: {}", clean(&err))}</p> }.into_any(),
                    Ok(None) => view! {
                        <p class="hint" data-out="people-admins-only">"People, API tokens and agent tokens are managed here by admins."</p>
                    }.into_any(),
                    Ok(Some(v)) => view! { <Manage v changed typed add_user issue_token issue_agent/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn Manage(
    v: PeopleView,
    changed: Callback<()>,
    typed: Typed,
    add_user: Action<(String, String, String), Answer<CreatedUser>>,
    issue_token: Action<(String, Option<u32>), Answer<CreatedToken>>,
    issue_agent: Action<(String, bool), Answer<CreatedToken>>,
) -> impl IntoView {
    let now = v.now_ms;
    let you = v.you.clone();
    let admins = v.people.iter().filter(|p| p.role == "admin").count();
    let mut tokens = v.tokens.clone();
    tokens
        .sort_by(|a, b| (a.state(now) != "active", b.created_at_ms).cmp(&(b.state(now) != "active", a.created_at_ms)));
    let choices: Vec<(String, String)> = v.people.iter().map(|p| (p.id.clone(), p.name.clone())).collect();
    view! {
        <h2 id="people">"People"</h2>
        <p class="hint">{format!("{} people can sign in; {admins} of them {} admin. A role change applies at their next click, by session or token alike.", v.people.len(), if admins == 1 { "is" } else { "are" })}</p>
        <div tabindex="0" class="table-wrap card">
            <table class="stack people">
                <thead><tr><th>"Name"</th><th>"Role"</th><th>"Added"</th><th class="num">"Live API tokens"</th><th>"Change"</th></tr></thead>
                <tbody>
                    {v.people.into_iter().map(|p| {
                        let yours = p.id == you;
                        view! { <PersonRow p yours changed/> }
                    }).collect_view()}
                </tbody>
            </table>
        </div>
        <AddPerson typed add_user/>

        <h2 id="tokens">"API tokens"</h2>
        <p class="hint">"Scripts and dashboards call the API with a token; it acts as its person, with their role. Revoke one and it stops working at once."</p>
        {if tokens.is_empty() {
            view! { <p class="notice">"No API token yet."</p> }.into_any()
        } else {
            view! {
                <div tabindex="0" class="table-wrap card">
                    <table class="stack tokens">
                        <thead><tr><th>"Id"</th><th>"Acts as"</th><th>"Issued"</th><th>"Expires"</th><th>"State"</th><th>"Change"</th></tr></thead>
                        <tbody>
                            {tokens.into_iter().map(|t| view! { <TokenRow t now changed/> }).collect_view()}
                        </tbody>
                    </table>
                </div>
            }.into_any()
        }}
        <IssueToken choices typed issue_token/>

        <h2 id="agents">"Agents"</h2>
        <p class="hint">"Each node's measurements agent uploads with its own token, which may do nothing else."</p>
        {if v.agents.is_empty() {
            view! { <p class="notice">"No agent yet."</p> }.into_any()
        } else {
            view! {
                <div tabindex="0" class="table-wrap card">
                    <table class="stack agents">
                        <thead><tr><th>"Name"</th><th>"Added"</th><th>"Last upload"</th></tr></thead>
                        <tbody>
                            {v.agents.into_iter().map(|a| view! {
                                <tr>
                                    <td data-label="Name">{a.name}</td>
                                    <td data-label="Added">{utc_minute(a.created_at_ms)}</td>
                                    <td data-label="Last upload">{a.last_seen_ms.map(utc_minute).unwrap_or_else(|| "never".into())}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
            }.into_any()
        }}
        <IssueAgentToken typed issue_agent/>
    }
}

#[component]
fn PersonRow(p: PersonView, yours: bool, changed: Callback<()>) -> impl IntoView {
    let stored = StoredValue::new((p.id.clone(), p.name.clone(), p.role.clone()));
    let role = RwSignal::new(p.role.clone());
    let confirming = RwSignal::new(false);
    let set_role = Action::new(|(id, role): &(String, String)| set_user_role(id.clone(), role.clone()));
    let remove = Action::new(|id: &String| delete_user(id.clone()));
    Effect::new(move || {
        match set_role.value().get() {
            Some(Ok(_)) => changed.run(()),
            // Refused (the last admin): show the role they still have.
            Some(Err(_)) => role.set(stored.with_value(|(_, _, r)| r.clone())),
            None => {}
        }
        if matches!(remove.value().get(), Some(Ok(()))) {
            changed.run(());
        }
    });
    let failure = move || match (set_role.value().get(), remove.value().get()) {
        (Some(Err(e)), _) => Some(format!("Role not changed: {}", clean(&e))),
        (_, Some(Err(e))) => Some(format!("Not removed: {}", clean(&e))),
        _ => None,
    };
    let name = p.name.clone();
    view! {
        <tr>
            <td data-label="Name">{p.name.clone()}{yours.then(|| view! { " "<span class="badge you">"you"</span> })}</td>
            <td data-label="Role">
                // Your own role is changed by another admin, so nobody locks themselves out by a slip.
                <select aria-label=format!("Role of {name}") disabled=move || yours || set_role.pending().get()
                    title=yours.then_some("another admin changes your role")
                    prop:value=move || role.get()
                    on:change=move |ev| {
                        let chosen = event_target_value(&ev);
                        role.set(chosen.clone());
                        set_role.dispatch((stored.with_value(|(id, _, _)| id.clone()), chosen));
                    }>
                    {ROLES.into_iter().map(|(value, _)| view! { <option value=value selected=p.role == value>{value}</option> }).collect_view()}
                </select>
            </td>
            <td data-label="Added">{utc_minute(p.created_at_ms)}</td>
            <td data-label="Live API tokens" class="num">{p.live_tokens}</td>
            <td data-label="Change" class="actions">
                {move || if yours {
                    view! { <span class="hint">"—"</span> }.into_any()
                } else if confirming.get() {
                    view! {
                        <span role="alert">{format!("Remove {} and their tokens? ", stored.with_value(|(_, n, _)| n.clone()))}</span>
                        <button type="button" class="link danger" disabled=move || remove.pending().get()
                            on:click=move |_| { remove.dispatch(stored.with_value(|(id, _, _)| id.clone())); }>"Yes, remove"</button>
                        " "
                        <button type="button" class="link" on:click=move |_| confirming.set(false)>"Keep"</button>
                    }.into_any()
                } else {
                    view! { <button type="button" class="link danger" on:click=move |_| confirming.set(true)>"Remove"</button> }.into_any()
                }}
                {move || failure().map(|text| view! { <p class="error" role="alert">{text}</p> })}
            </td>
        </tr>
    }
}

#[component]
fn AddPerson(typed: Typed, add_user: Action<(String, String, String), Answer<CreatedUser>>) -> impl IntoView {
    let Typed { user_name: name, user_role: role, user_password: password, .. } = typed;
    view! {
        <div class="card">
            <h3>"Add a person"</h3>
            <div class="inline-form">
                <label>"Name "<input id="new-user-name" type="text" maxlength="64" autocomplete="off" placeholder="e.g. ana"
                    prop:value=move || name.get() on:input=move |ev| name.set(event_target_value(&ev))/></label>
                <label>"Role "<select id="new-user-role" prop:value=move || role.get() on:change=move |ev| role.set(event_target_value(&ev))>
                    {ROLES.into_iter().map(|(value, words)| view! { <option value=value selected=value == role.get_untracked()>{words}</option> }).collect_view()}
                </select></label>
                <label>"Password "<input id="new-user-password" type="password" autocomplete="new-password" placeholder="empty: make one up"
                    prop:value=move || password.get() on:input=move |ev| password.set(event_target_value(&ev))/></label>
                <button type="button" class="primary" disabled=move || add_user.pending().get() || name.get().trim().is_empty()
                    on:click=move |_| { add_user.dispatch((name.get_untracked(), role.get_untracked(), password.get_untracked())); }>"Add"</button>
            </div>
            <p class="hint">"Names are letters, digits, '.', '_', '-' and '@'. A password has 8 to 256 characters; leave it empty and one is made up and shown here once."</p>
            {move || add_user.value().get().map(|result| match result {
                Ok(CreatedUser { person, generated_password: Some(secret) }) => view! {
                    <Secret what=format!("Added {} as {}. Their password, shown only now:", person.name, person.role) secret
                        then="Pass it on privately; they sign in with it at this address.".to_string()/>
                }.into_any(),
                Ok(CreatedUser { person, generated_password: None }) => view! {
                    <p class="saved" role="status">{format!("Added {} as {}; they sign in with the password you gave.", person.name, person.role)}</p>
                }.into_any(),
                Err(e) => view! { <p class="error" role="alert">{format!("Not added: {}", clean(&e))}</p> }.into_any(),
            })}
        </div>
    }
}

#[component]
fn TokenRow(t: TokenView, now: i64, changed: Callback<()>) -> impl IntoView {
    let state = t.state(now);
    let id = StoredValue::new(t.id.clone());
    let revoke = Action::new(|id: &String| revoke_api_token(id.clone()));
    Effect::new(move || {
        if matches!(revoke.value().get(), Some(Ok(()))) {
            changed.run(());
        }
    });
    let when = |at: Option<i64>, none: &str| at.map(utc_minute).unwrap_or_else(|| none.to_string());
    let state_words = match state {
        "revoked" => format!("revoked {}", when(t.revoked_at_ms, "")),
        other => other.to_string(),
    };
    view! {
        <tr class=format!("token-{state}")>
            <td data-label="Id"><code>{t.id.clone()}</code></td>
            <td data-label="Acts as">{t.user_name.clone()}</td>
            <td data-label="Issued">{utc_minute(t.created_at_ms)}</td>
            <td data-label="Expires">{when(t.expires_at_ms, "never")}</td>
            <td data-label="State" data-out="token-state">{state_words}</td>
            <td data-label="Change" class="actions">
                {(state == "active").then(|| view! {
                    <button type="button" class="link danger" aria-label=format!("Revoke token {}", t.id) disabled=move || revoke.pending().get()
                        on:click=move |_| { revoke.dispatch(id.get_value()); }>"Revoke"</button>
                })}
                {move || revoke.value().get().and_then(|r| r.err()).map(|e| view! { <p class="error" role="alert">{format!("Not revoked: {}", clean(&e))}</p> })}
            </td>
        </tr>
    }
}

#[component]
fn IssueToken(
    choices: Vec<(String, String)>,
    typed: Typed,
    issue_token: Action<(String, Option<u32>), Answer<CreatedToken>>,
) -> impl IntoView {
    let Typed { token_user: typed_user, token_days: days, .. } = typed;
    let ids: Vec<String> = choices.iter().map(|(id, _)| id.clone()).collect();
    // The person picked before, while they are still listed; else the first.
    let user = Memo::new(move |_| {
        let picked = typed_user.get();
        if ids.contains(&picked) { picked } else { ids.first().cloned().unwrap_or_default() }
    });
    let picked = user.get_untracked();
    // Empty means never; anything else must be a whole number of days.
    let parsed = move || {
        let text = days.get();
        let text = text.trim();
        if text.is_empty() {
            Ok(None)
        } else {
            text.parse::<u32>().map(Some).map_err(|_| "a whole number of days, or empty for never")
        }
    };
    view! {
        <div class="card">
            <h3>"Issue an API token"</h3>
            <div class="inline-form">
                <label>"Acts as "<select id="token-user" prop:value=move || user.get() on:change=move |ev| typed_user.set(event_target_value(&ev))>
                    {choices.into_iter().map(|(id, name)| view! { <option selected=id == picked value=id>{name}</option> }).collect_view()}
                </select></label>
                <label>"Expires in days "<input id="token-days" type="text" inputmode="numeric" size="6" placeholder="never"
                    prop:value=move || days.get() on:input=move |ev| days.set(event_target_value(&ev))/></label>
                <button type="button" class="primary" disabled=move || issue_token.pending().get() || parsed().is_err() || user.get().is_empty()
                    on:click=move |_| {
                        if let Ok(days) = parsed() {
                            issue_token.dispatch((user.get_untracked(), days));
                        }
                    }>"Issue token"</button>
            </div>
            <p class="hint" data-out="token-days-why">{move || parsed().err().map(|why| format!("Expires in days: {why}.")).unwrap_or_default()}</p>
            {move || issue_token.value().get().map(|result| match result {
                Ok(t) => {
                    let expires = t.expires_at_ms.map(|at| format!("it expires {}", utc_minute(at))).unwrap_or_else(|| "it never expires".into());
                    view! {
                        <Secret what=format!("Token {} acting as {}; {expires}. Shown only now:", t.id, t.acts_as) secret=t.secret.clone()
                            then=format!("Scripts send it as the header 'Authorization: Bearer <token>' to {}/api/v1/….", origin())/>
                    }.into_any()
                }
                Err(e) => view! { <p class="error" role="alert">{format!("Not issued: {}", clean(&e))}</p> }.into_any(),
            })}
        </div>
    }
}

#[component]
fn IssueAgentToken(typed: Typed, issue_agent: Action<(String, bool), Answer<CreatedToken>>) -> impl IntoView {
    let Typed { agent_name: name, agent_replace: replace, .. } = typed;
    view! {
        <div class="card">
            <h3>"Issue an agent token"</h3>
            <div class="inline-form">
                <label>"Agent name "<input id="agent-name" type="text" maxlength="64" autocomplete="off" placeholder="e.g. gpu-node-7"
                    prop:value=move || name.get() on:input=move |ev| name.set(event_target_value(&ev))/></label>
                <label class="check"><input id="agent-replace" type="checkbox" prop:checked=move || replace.get()
                    on:change=move |ev| replace.set(event_target_checked(&ev))/>" Replace the token of an agent with this name"</label>
                <button type="button" class="primary" disabled=move || issue_agent.pending().get() || name.get().trim().is_empty()
                    on:click=move |_| { issue_agent.dispatch((name.get_untracked(), replace.get_untracked())); }>"Issue agent token"</button>
            </div>
            <p class="hint">"Replacing a token stops the old one at once: the node's agent keeps its results and uploads them once given the new one."</p>
            {move || issue_agent.value().get().map(|result| match result {
                Ok(t) => {
                    let what = if t.replaced { format!("New token for agent {}; its old one no longer works. Shown only now:", t.id) } else { format!("Token for agent {}, shown only now:", t.id) };
                    view! {
                        <Secret what secret=t.secret.clone() then="On the node, measure and upload with:".to_string()
                            command=format!("HEADROOM_TOKEN='{}' measurements-agent run --server {}", t.secret, origin())/>
                    }.into_any()
                }
                Err(e) => view! { <p class="error" role="alert">{format!("Not issued: {}", clean(&e))}</p> }.into_any(),
            })}
        </div>
    }
}

/// A secret shown once, selectable in one click, and what to do with it.
#[component]
fn Secret(what: String, secret: String, then: String, #[prop(optional)] command: Option<String>) -> impl IntoView {
    view! {
        <div class="secret card" role="status">
            <p>{what}</p>
            <p><code class="secret-value" data-out="secret">{secret}</code></p>
            <p class="hint">{then}</p>
            {command.map(|c| view! { <pre class="command" data-out="command"><code>{c}</code></pre> })}
            <p class="hint">"It cannot be shown again: copy it now."</p>
        </div>
    }
}

/// The address this page was opened at, for commands to copy (empty while rendering on the server,
/// where no secret is ever shown).
fn origin() -> String {
    #[cfg(feature = "hydrate")]
    {
        leptos::prelude::window().location().origin().unwrap_or_default()
    }
    #[cfg(not(feature = "hydrate"))]
    {
        String::new()
    }
}
