//! How a [`Verdict`] is shown: the terminal text and the markdown table of `buzz-load check`.

use std::fmt::Write as _;

use crate::distributed::check::verdict::Verdict;

impl Verdict {
    /// The verdict table and details, for a terminal.
    #[must_use]
    pub fn text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "check: {}", if self.pass { "PASS" } else { "FAIL" });
        for l in &self.lines {
            let _ = writeln!(o, "  [{}] {}: {}", if l.pass { "ok" } else { "FAIL" }, l.check, l.found);
        }
        let acked: Vec<String> = self.acked.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let _ = writeln!(o, "  acknowledged by operation: {}", acked.join(", "));
        for (t, n) in &self.error_texts {
            let _ = writeln!(o, "  error: answer x{n}: {t}");
        }
        for (p, texts) in &self.other_refusals {
            for (t, n) in texts {
                let _ = writeln!(o, "  {p} refusal x{n}: {t}");
            }
        }
        for (op, n) in &self.unanswered {
            let _ = writeln!(o, "  unanswered {op}: {n}");
        }
        let tr: Vec<String> = self.transport.iter().map(|(k, n)| format!("{k} {n}")).collect();
        if !tr.is_empty() {
            let _ =
                writeln!(o, "  lost sockets / failed connects (no answer, reconnected): {}", tr.join(", "));
        }
        let rc: Vec<String> = self.reconnects.iter().map(|(k, n)| format!("{k} {n}")).collect();
        if !rc.is_empty() {
            let _ = writeln!(o, "  reconnects: {}", rc.join(", "));
        }
        for g in &self.gap_examples {
            let _ = writeln!(o, "  gap: {g}");
        }
        for id in self.lost.iter().take(10) {
            let _ = writeln!(o, "  lost: {id}");
        }
        for e in self.reads.iter().flat_map(|r| &r.examples) {
            let _ = writeln!(o, "  read: {e}");
        }
        for (k, val) in &self.notes {
            let _ = writeln!(o, "  {k}: {val}");
        }
        o
    }

    /// The verdict as markdown.
    #[must_use]
    pub fn markdown(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "**Verdict: {}**\n", if self.pass { "PASS" } else { "FAIL" });
        let _ = writeln!(o, "| check | found | |\n| --- | --- | --- |");
        for l in &self.lines {
            let _ = writeln!(
                o,
                "| {} | {} | {} |",
                l.check,
                l.found.replace('|', "\\|"),
                if l.pass { "ok" } else { "FAIL" }
            );
        }
        if !self.error_texts.is_empty() {
            let _ = writeln!(o, "\n`error:` answers:\n");
            for (t, n) in &self.error_texts {
                let _ = writeln!(o, "- {n} × `{t}`");
            }
        }
        if !self.other_refusals.is_empty() {
            let _ = writeln!(o, "\nOther refusals:\n");
            for (p, texts) in &self.other_refusals {
                for (t, n) in texts {
                    let _ = writeln!(o, "- `{p}` {n} × `{t}`");
                }
            }
        }
        if !self.notes.is_empty() {
            let _ = writeln!(o, "\n| fact | value |\n| --- | --- |");
            for (k, val) in &self.notes {
                let _ = writeln!(o, "| {k} | {val} |");
            }
        }
        o
    }
}
