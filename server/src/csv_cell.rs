//! Text cells in CSV that a spreadsheet will not run (OWASP's advice on CSV injection): a cell
//! that starts with `=`, `+`, `-`, `@`, a tab or a carriage return is prefixed with `'`, which
//! spreadsheets show as text and hide. Numbers are written by us and never pass through here.

use std::borrow::Cow;

const TRIGGERS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// `text` as a CSV cell that a spreadsheet shows as text.
pub fn neutral(text: &str) -> Cow<'_, str> {
    if text.starts_with(TRIGGERS) { Cow::Owned(format!("'{text}")) } else { Cow::Borrowed(text) }
}

/// Undoes [`neutral`] on a cell read back from a CSV we wrote.
pub fn restore(cell: &str) -> &str {
    match cell.strip_prefix('\'') {
        Some(rest) if rest.starts_with(TRIGGERS) => rest,
        _ => cell,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas_become_text_and_come_back() {
        for text in ["=HYPERLINK(\"http://x\",\"y\")", "+1", "-2+3", "@SUM(A1)", "\tx", "\rx"] {
            let cell = neutral(text);
            assert!(cell.starts_with('\''), "{text:?}");
            assert_eq!(restore(&cell), text);
        }
        for text in ["g5.xlarge", "aws", "1.5", "'quoted", ""] {
            assert_eq!(neutral(text), text);
            assert_eq!(restore(text), text);
        }
    }
}
