//! Why two sets of inputs give different answers: the difference split into one part per input
//! that changed, as a waterfall.

use std::collections::BTreeMap;

/// One step of a breakdown: the inputs switched at this step and how far the answer moved.
#[derive(Debug, Clone, PartialEq)]
pub struct Part<K> {
    /// Usually one input; more when a mix in between had no answer (see [`breakdown`]).
    pub inputs: Vec<K>,
    pub change: f64,
}

/// The answer for both sets of inputs and the steps between them.
#[derive(Debug, Clone, PartialEq)]
pub struct Breakdown<K> {
    pub from: f64,
    pub to: f64,
    pub parts: Vec<Part<K>>,
}

impl<K> Breakdown<K> {
    /// `to − from`; the parts add up to it (up to rounding).
    pub fn total(&self) -> f64 {
        self.to - self.from
    }
}

/// Switches the inputs that differ between `from` and `to` one at a time, from their `from`
/// value to their `to` value, and records how far `answer` moves at each switch. The parts add up
/// to `answer(to) − answer(from)`: the sum telescopes.
///
/// Inputs switch in `order` (the order a page lists its fields; a repeat is ignored), then any
/// others in key order.
/// An input present on one side only is added or removed at its step. Where a mix of the two
/// has no answer (`None`, a combination the model refuses), that switch joins the next one in a
/// single part, so nothing is left out. `None` when either side itself has no answer.
///
/// Order matters when inputs interact (a price moves the answer only while the cost is derived
/// from it); this is a waterfall in the stated order, not an order-free (Shapley) split, which
/// would need an answer for every subset of the changed inputs.
pub fn breakdown<K, V>(
    from: &BTreeMap<K, V>,
    to: &BTreeMap<K, V>,
    order: &[K],
    answer: impl Fn(&BTreeMap<K, V>) -> Option<f64>,
) -> Option<Breakdown<K>>
where
    K: Ord + Clone,
    V: Clone + PartialEq,
{
    let start = answer(from)?;
    let end = answer(to)?;
    let differs = |k: &K| from.get(k) != to.get(k);
    let mut changed: Vec<K> = Vec::new();
    for k in order.iter().filter(|k| differs(k)) {
        if !changed.contains(k) {
            changed.push(k.clone());
        }
    }
    let mut rest: Vec<K> = from.keys().chain(to.keys()).filter(|k| differs(k) && !order.contains(k)).cloned().collect();
    rest.sort();
    rest.dedup();
    changed.extend(rest);

    let mut state = from.clone();
    let mut last = start;
    let mut pending = Vec::new();
    let mut parts = Vec::new();
    let count = changed.len();
    for (i, key) in changed.into_iter().enumerate() {
        match to.get(&key) {
            Some(v) => state.insert(key.clone(), v.clone()),
            None => state.remove(&key),
        };
        pending.push(key);
        // The last switch reaches `to`, whose answer is known.
        let now = if i + 1 == count { Some(end) } else { answer(&state) };
        if let Some(value) = now {
            parts.push(Part { inputs: std::mem::take(&mut pending), change: value - last });
            last = value;
        }
    }
    Some(Breakdown { from: start, to: end, parts })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn map(pairs: &[(&'static str, f64)]) -> BTreeMap<&'static str, f64> {
        pairs.iter().copied().collect()
    }

    /// Cost per request: training ÷ requests + serving, or price ÷ throughput when derived.
    fn cost(m: &BTreeMap<&'static str, f64>) -> Option<f64> {
        let requests = *m.get("requests")?;
        if requests <= 0.0 {
            return None;
        }
        let serving = if m.get("derive") == Some(&1.0) { m.get("price")? / m.get("throughput")? } else { m["serving"] };
        Some(m["training"] / requests + serving)
    }

    #[test]
    fn each_changed_input_gets_its_step_in_the_stated_order() {
        let a = map(&[("requests", 1e6), ("training", 1000.0), ("serving", 0.01)]);
        let b = map(&[("requests", 2e6), ("training", 1000.0), ("serving", 0.004)]);
        let d = breakdown(&a, &b, &["serving", "requests", "training"], cost).unwrap();
        assert_eq!(d.parts.len(), 2, "training did not change: {d:?}");
        assert_eq!(d.parts[0].inputs, vec!["serving"]);
        assert!((d.parts[0].change - (-0.006)).abs() < 1e-15);
        assert_eq!(d.parts[1].inputs, vec!["requests"]);
        assert!((d.parts[1].change - (-0.0005)).abs() < 1e-15);
        assert!((d.total() - (0.0045 - 0.011)).abs() < 1e-15);
    }

    #[test]
    fn a_mix_with_no_answer_joins_the_next_switch() {
        // Switching `derive` first needs a price and throughput `a` does not have.
        let a = map(&[("requests", 1e6), ("training", 0.0), ("serving", 0.01)]);
        let b = map(&[
            ("requests", 1e6),
            ("training", 0.0),
            ("serving", 0.01),
            ("derive", 1.0),
            ("price", 2.0),
            ("throughput", 1000.0),
        ]);
        let d = breakdown(&a, &b, &["derive", "price", "throughput"], cost).unwrap();
        assert_eq!(d.parts.len(), 1, "{d:?}");
        assert_eq!(d.parts[0].inputs, vec!["derive", "price", "throughput"]);
        assert!((d.parts[0].change - (0.002 - 0.01)).abs() < 1e-15);
        // Price before derive: the price alone moves nothing, then derive moves it all.
        let d = breakdown(&a, &b, &["price", "throughput", "derive"], cost).unwrap();
        let changes: Vec<f64> = d.parts.iter().map(|p| p.change).collect();
        assert_eq!(d.parts.len(), 3, "{d:?}");
        assert_eq!(&changes[..2], &[0.0, 0.0]);
        assert!((changes[2] + 0.008).abs() < 1e-15);
    }

    #[test]
    fn no_answer_on_either_side_is_no_breakdown_and_equal_sides_have_no_parts() {
        let a = map(&[("requests", 1e6), ("training", 0.0), ("serving", 0.01)]);
        let bad = map(&[("requests", 0.0), ("training", 0.0), ("serving", 0.01)]);
        assert!(breakdown(&a, &bad, &[], cost).is_none());
        assert!(breakdown(&bad, &a, &[], cost).is_none());
        let same = breakdown(&a, &a, &["requests"], cost).unwrap();
        assert!(same.parts.is_empty());
        assert_eq!(same.total(), 0.0);
    }

    proptest! {
        #[test]
        fn parts_add_up_to_the_difference_and_name_each_changed_input_once(
            a in proptest::collection::btree_map(0u8..12, -1e6f64..1e6, 0..12),
            b in proptest::collection::btree_map(0u8..12, -1e6f64..1e6, 0..12),
            order in proptest::collection::vec(0u8..12, 0..12),
        ) {
            // A model with interactions and refusals: a product of two inputs, refused when
            // input 0 is negative.
            let f = |m: &BTreeMap<u8, f64>| {
                let x = m.get(&0).copied().unwrap_or(1.0);
                (x >= 0.0).then(|| m.values().sum::<f64>() + x * m.get(&1).copied().unwrap_or(0.0))
            };
            if let Some(d) = breakdown(&a, &b, &order, f) {
                let sum: f64 = d.parts.iter().map(|p| p.change).sum();
                let scale = 1.0 + d.from.abs().max(d.to.abs()) + d.parts.iter().map(|p| p.change.abs()).sum::<f64>();
                prop_assert!((sum - d.total()).abs() <= 1e-12 * scale, "{sum} vs {}", d.total());
                let mut named: Vec<u8> = d.parts.iter().flat_map(|p| p.inputs.clone()).collect();
                let before = named.len();
                named.sort();
                named.dedup();
                prop_assert_eq!(before, named.len());
                let mut differ: Vec<u8> = a.keys().chain(b.keys()).filter(|k| a.get(k) != b.get(k)).copied().collect();
                differ.sort();
                differ.dedup();
                prop_assert_eq!(named, differ);
            }
        }
    }
}
