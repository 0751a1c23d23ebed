//! Input forms of the planning pages: fields kept as the text people typed, parsed and checked
//! as they type, marked at the field when wrong, and written to a URL query so a page's inputs
//! can be shared and saved.

use std::collections::BTreeMap;

use leptos::prelude::*;
use leptos_router::params::ParamsMap;

/// What a field accepts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// A number above zero.
    Positive,
    /// Zero or more.
    NonNegative,
    /// A percentage in [0, 100).
    Percent,
    /// Any finite number (an accuracy change may be negative).
    Any,
    /// A yes/no switch, written `1` or `0`.
    Flag,
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
    /// Free text (a node id).
    Text,
}

/// One input of a page.
#[derive(Clone, Copy, Debug)]
pub struct FieldSpec {
    pub key: &'static str,
    pub label: &'static str,
    /// Shown after the field: `USD`, `requests / month`, `%`.
    pub unit: &'static str,
    pub default: &'static str,
    pub rule: Rule,
}

/// Reads a number as people type it: `50M`, `1.2B`, `20k`, `50,000,000`, `1e8`, `0.0001`.
pub fn parse_number(text: &str) -> Result<f64, String> {
    let cleaned: String = text.trim().chars().filter(|c| !matches!(c, ',' | '_' | ' ' | '$')).collect();
    if cleaned.is_empty() {
        return Err("enter a number".into());
    }
    let (digits, scale) = match cleaned.chars().last() {
        Some('k' | 'K') => (&cleaned[..cleaned.len() - 1], 1e3),
        Some('M') => (&cleaned[..cleaned.len() - 1], 1e6),
        Some('B' | 'G') => (&cleaned[..cleaned.len() - 1], 1e9),
        Some('T') => (&cleaned[..cleaned.len() - 1], 1e12),
        _ => (cleaned.as_str(), 1.0),
    };
    let value: f64 = digits.parse().map_err(|_| format!("“{}” is not a number", text.trim()))?;
    let value = value * scale;
    if !value.is_finite() { Err("must be a finite number".into()) } else { Ok(value) }
}

impl FieldSpec {
    /// The field's value, or why it is not acceptable.
    pub fn check(&self, text: &str) -> Result<f64, String> {
        match self.rule {
            Rule::Flag => match text {
                "1" => Ok(1.0),
                "0" | "" => Ok(0.0),
                _ => Err("must be 1 or 0".into()),
            },
            Rule::Choice(options) => options
                .iter()
                .position(|o| *o == text)
                .map(|i| i as f64)
                .ok_or_else(|| format!("must be one of: {}", options.join(", "))),
            Rule::Text => Ok(0.0),
            _ => {
                let v = parse_number(text)?;
                match self.rule {
                    Rule::Positive if v <= 0.0 => Err("must be greater than zero".into()),
                    Rule::NonNegative if v < 0.0 => Err("must not be negative".into()),
                    Rule::Percent if !(0.0..100.0).contains(&v) => Err("must be from 0 to below 100 %".into()),
                    _ => Ok(v),
                }
            }
        }
    }
}

/// Checks stored or shared inputs of a page against its fields: every key known, every value
/// acceptable. Used by the server before it saves a scenario.
pub fn validate(specs: &[FieldSpec], values: &BTreeMap<String, String>) -> Result<(), (String, String)> {
    for (key, value) in values {
        let spec = specs
            .iter()
            .find(|s| s.key == key)
            .ok_or_else(|| (key.clone(), "is not an input of this page".to_string()))?;
        spec.check(value).map_err(|reason| (key.clone(), reason))?;
    }
    Ok(())
}

/// A page's fields and what is typed in them.
#[derive(Clone, Copy)]
pub struct Form {
    specs: &'static [FieldSpec],
    values: StoredValue<Vec<RwSignal<String>>>,
    /// Whether reads subscribe (a live page) or not (a snapshot computed once).
    tracked: bool,
}

impl Form {
    /// Fields filled from the URL query where it names them, from their defaults otherwise.
    pub fn new(specs: &'static [FieldSpec], query: &ParamsMap) -> Self {
        Self::filled(specs, |key| query.get(key), true)
    }

    /// Stored inputs read once, outside any reactive context (a list of saved scenarios):
    /// nothing subscribes, so nothing warns.
    pub fn snapshot(specs: &'static [FieldSpec], values: &BTreeMap<String, String>) -> Self {
        Self::filled(specs, |key| values.get(key).cloned(), false)
    }

    fn filled(specs: &'static [FieldSpec], given: impl Fn(&str) -> Option<String>, tracked: bool) -> Self {
        let values =
            specs.iter().map(|s| RwSignal::new(given(s.key).unwrap_or_else(|| s.default.to_string()))).collect();
        Form { specs, values: StoredValue::new(values), tracked }
    }

    fn index(&self, key: &str) -> usize {
        self.specs.iter().position(|s| s.key == key).unwrap_or_else(|| panic!("no field {key}"))
    }

    pub fn spec(&self, key: &str) -> FieldSpec {
        self.specs[self.index(key)]
    }

    pub fn signal(&self, key: &str) -> RwSignal<String> {
        let i = self.index(key);
        self.values.with_value(|v| v[i])
    }

    /// The field as typed, tracked: read it inside a memo, effect or view closure.
    pub fn text(&self, key: &str) -> String {
        if self.tracked { self.signal(key).get() } else { self.signal(key).get_untracked() }
    }

    /// The field as typed, without subscribing: for event handlers and one-off reads.
    pub fn text_untracked(&self, key: &str) -> String {
        self.signal(key).get_untracked()
    }

    /// The field's number, or the field's label and why it is wrong.
    pub fn num(&self, key: &str) -> Result<f64, String> {
        let spec = self.spec(key);
        spec.check(&self.text(key)).map_err(|reason| format!("{}: {reason}", spec.label))
    }

    pub fn flag(&self, key: &str) -> bool {
        self.text(key) == "1"
    }

    /// Every field as typed.
    pub fn values(&self) -> BTreeMap<String, String> {
        self.specs.iter().map(|s| (s.key.to_string(), self.text(s.key))).collect()
    }

    /// Every field as typed, without subscribing.
    pub fn values_untracked(&self) -> BTreeMap<String, String> {
        self.specs.iter().map(|s| (s.key.to_string(), self.text_untracked(s.key))).collect()
    }

    /// The inputs as a URL query (without `?`), tracked.
    pub fn query(&self) -> String {
        to_query(&self.values())
    }

    /// [`Form::query`] without subscribing, for event handlers.
    pub fn query_untracked(&self) -> String {
        to_query(&self.values_untracked())
    }
}

/// `key=value&…`, percent-encoding what a query value cannot hold.
pub fn to_query(values: &BTreeMap<String, String>) -> String {
    values.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect::<Vec<_>>().join("&")
}

/// The inverse of [`to_query`]: `a=1&b=x%20y` → {a: 1, b: x y}.
pub fn from_query(query: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.insert(decode(k)?, decode(v)?);
    }
    Ok(out)
}

fn decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = text.get(i + 1..i + 3).ok_or_else(|| format!("bad escape in “{text}”"))?;
                out.push(u8::from_str_radix(hex, 16).map_err(|_| format!("bad escape in “{text}”"))?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| format!("“{text}” is not UTF-8"))
}

fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A labelled number input, marked with the reason when what is typed is not acceptable.
#[component]
pub fn NumberField(
    form: Form,
    key: &'static str,
    #[prop(optional)] hint: &'static str,
    /// A hint that follows the inputs (a range, a derived figure).
    #[prop(optional, into)]
    live_hint: Option<Signal<String>>,
) -> impl IntoView {
    let spec = form.spec(key);
    let value = form.signal(key);
    let error = move || spec.check(&value.get()).err();
    let id = format!("f-{key}");
    let error_id = format!("f-{key}-error");
    view! {
        <div class="field" class:invalid=move || error().is_some() data-field=key>
            <label for=id.clone()>{spec.label}</label>
            <div class="input-row">
                <input
                    id=id
                    name=key
                    type="text"
                    inputmode="decimal"
                    autocomplete="off"
                    // The attribute shows the value before the bundle hydrates; the property keeps it live.
                    value=value.get_untracked()
                    prop:value=move || value.get()
                    on:input=move |ev| value.set(event_target_value(&ev))
                    aria-invalid=move || if error().is_some() { "true" } else { "false" }
                    aria-describedby=error_id.clone()
                />
                <span class="unit">{spec.unit}</span>
            </div>
            {(!hint.is_empty()).then(|| view! { <p class="hint">{hint}</p> })}
            {live_hint.map(|h| view! { <p class="hint" data-hint=key>{move || h.get()}</p> })}
            <p class="field-error" id=error_id role="alert">{move || error().unwrap_or_default()}</p>
        </div>
    }
}

/// A labelled switch stored as `1` or `0`.
#[component]
pub fn FlagField(form: Form, key: &'static str) -> impl IntoView {
    let spec = form.spec(key);
    let value = form.signal(key);
    view! {
        <label class="switch" data-field=key>
            // Submitted before hydration: an unchecked box sends the hidden 0, a checked one
            // sends 0 then 1, and the last value counts.
            <input type="hidden" name=key value="0"/>
            <input
                type="checkbox"
                name=key
                value="1"
                checked=value.get_untracked() == "1"
                prop:checked=move || value.get() == "1"
                on:change=move |ev| value.set(if event_target_checked(&ev) { "1".into() } else { "0".into() })
            />
            {spec.label}
        </label>
    }
}

/// A labelled choice among words.
#[component]
pub fn ChoiceField(form: Form, key: &'static str, labels: &'static [&'static str]) -> impl IntoView {
    let spec = form.spec(key);
    let value = form.signal(key);
    let Rule::Choice(options) = spec.rule else { panic!("{key} is not a choice") };
    let id = format!("f-{key}");
    view! {
        <div class="field" data-field=key>
            <label for=id.clone()>{spec.label}</label>
            <select id=id name=key on:change=move |ev| value.set(event_target_value(&ev)) prop:value=move || value.get()>
                {options.iter().zip(labels.iter()).map(|(o, l)| view! {
                    <option value=*o selected=move || value.get() == *o>{*l}</option>
                }).collect_view()}
            </select>
        </div>
    }
}

/// What the pages' tests share: signals with an owner, and a form filled from pairs.
#[cfg(all(test, feature = "ssr"))]
pub mod testing {
    use leptos::prelude::Owner;
    use leptos_router::params::ParamsMap;

    use super::{FieldSpec, Form};

    /// Runs `f` under a root owner: signals need one (and, on the server build, an arena).
    pub fn owned<T>(f: impl FnOnce() -> T) -> T {
        Owner::new_root(None).with(f)
    }

    /// A form of `fields` as a page opened with the query `pairs` would fill it.
    pub fn form(fields: &'static [FieldSpec], pairs: &[(&str, &str)]) -> Form {
        let mut query = ParamsMap::new();
        for (k, v) in pairs {
            query.insert(k.to_string(), v.to_string());
        }
        Form::new(fields, &query)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_the_way_people_write_them() {
        assert_eq!(parse_number("50M"), Ok(50e6));
        assert_eq!(parse_number("1.5k"), Ok(1500.0));
        assert_eq!(parse_number(" 50,000,000 "), Ok(50e6));
        assert_eq!(parse_number("$0.0001"), Ok(1e-4));
        assert_eq!(parse_number("1e8"), Ok(1e8));
        assert!(parse_number("").is_err());
        assert!(parse_number("NaN").is_err());
        assert!(parse_number("inf").is_err());
        assert!(parse_number("ten").unwrap_err().contains("ten"));
    }

    #[test]
    fn rules_name_the_problem() {
        let spec = |rule| FieldSpec { key: "k", label: "L", unit: "", default: "1", rule };
        assert_eq!(spec(Rule::Positive).check("0"), Err("must be greater than zero".into()));
        assert_eq!(spec(Rule::NonNegative).check("-1"), Err("must not be negative".into()));
        assert!(spec(Rule::Percent).check("100").is_err());
        assert_eq!(spec(Rule::Any).check("-0.5"), Ok(-0.5));
        assert_eq!(spec(Rule::Choice(&["a", "b"])).check("b"), Ok(1.0));
        assert!(spec(Rule::Choice(&["a", "b"])).check("c").is_err());
    }

    #[test]
    fn stored_inputs_are_checked_key_by_key() {
        const SPECS: &[FieldSpec] = &[FieldSpec { key: "r", label: "R", unit: "", default: "1", rule: Rule::Positive }];
        let ok: BTreeMap<String, String> = [("r".to_string(), "5M".to_string())].into();
        assert!(validate(SPECS, &ok).is_ok());
        let unknown: BTreeMap<String, String> = [("x".to_string(), "1".to_string())].into();
        assert_eq!(validate(SPECS, &unknown).unwrap_err().0, "x");
        let bad: BTreeMap<String, String> = [("r".to_string(), "-1".to_string())].into();
        assert_eq!(validate(SPECS, &bad).unwrap_err().1, "must be greater than zero");
        assert_eq!(to_query(&ok), "r=5M");
        let spaced: BTreeMap<String, String> = [("n".to_string(), "a b&c".to_string())].into();
        assert_eq!(to_query(&spaced), "n=a%20b%26c");
        assert_eq!(from_query("n=a%20b%26c").unwrap(), spaced);
        assert!(from_query("n=%zz").is_err());
    }
}
