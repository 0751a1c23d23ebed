//! Prompts for LLM endpoints: spans of a shipped corpus (`prompts.txt`, written for this
//! project) with lengths drawn uniformly from a range of words, the same for every run.

use model::plan::rng::Rng;

const CORPUS: &str = include_str!("prompts.txt");

/// `count` prompts whose lengths in words are uniform over `words` (inclusive).
pub fn prompts(words: (u32, u32), count: usize) -> Vec<String> {
    let corpus: Vec<&str> = CORPUS.split_whitespace().collect();
    let mut rng = Rng::seeded(0x5eed);
    (0..count)
        .map(|_| {
            let span = words.1.saturating_sub(words.0) as u64 + 1;
            let length = words.0 as usize + (rng.next_u64() % span) as usize;
            let start = (rng.next_u64() % corpus.len() as u64) as usize;
            (0..length.max(1)).map(|i| corpus[(start + i) % corpus.len()]).collect::<Vec<_>>().join(" ")
        })
        .collect()
}

/// `N` or `MIN-MAX` words, each between 1 and 100,000.
pub fn parse_words(text: &str) -> Result<(u32, u32), String> {
    let bad = || format!("--prompt-words must be N or MIN-MAX words (1 to 100000), not '{text}'");
    let (low, high) = match text.split_once('-') {
        Some((a, b)) => (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?),
        None => {
            let n = text.trim().parse().map_err(|_| bad())?;
            (n, n)
        }
    };
    if low == 0 || high < low || high > 100_000 {
        return Err(bad());
    }
    Ok((low, high))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_lengths_follow_the_range() {
        let fixed = prompts((40, 40), 8);
        assert!(fixed.iter().all(|p| p.split_whitespace().count() == 40));
        let ranged = prompts((10, 20), 200);
        let lengths: Vec<usize> = ranged.iter().map(|p| p.split_whitespace().count()).collect();
        assert!(lengths.iter().all(|n| (10..=20).contains(n)));
        assert!(lengths.contains(&10) && lengths.contains(&20));
        assert_eq!(parse_words("64-256"), Ok((64, 256)));
        assert!(parse_words("0").is_err() && parse_words("9-3").is_err());
    }
}
