//! The lines of an import, each at most `max` bytes (`BUZZ_IMPORT_MAX_LINE_BYTES`): a longer
//! line is refused once `max + 1` bytes of it are read, so a file without line breaks never
//! grows a line in memory past the limit.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

/// A line longer than the limit (413 `import_line_too_long`).
#[derive(Debug, thiserror::Error)]
#[error("a line of the export is longer than {0} bytes (BUZZ_IMPORT_MAX_LINE_BYTES)")]
pub struct LineTooLong(pub usize);

/// Why no line was read.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    /// Over the limit.
    #[error(transparent)]
    TooLong(#[from] LineTooLong),
    /// The line is not UTF-8.
    #[error("a line of the export is not UTF-8")]
    NotUtf8,
    /// The file could not be read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Bounded lines of `reader`.
pub struct BoundedLines<R> {
    reader: R,
    max: usize,
    buf: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> BoundedLines<R> {
    /// Lines of `reader`, each at most `max` bytes (without its `\n`).
    pub fn new(reader: R, max: usize) -> Self {
        Self { reader, max, buf: Vec::new() }
    }

    /// The next line without its `\n` (or `\r\n`), borrowed from the reader's buffer (no copy);
    /// `None` at the end.
    pub async fn next_line(&mut self) -> Result<Option<&str>, LineError> {
        self.buf.clear();
        let limit = u64::try_from(self.max).unwrap_or(u64::MAX).saturating_add(2);
        let n = (&mut self.reader).take(limit).read_until(b'\n', &mut self.buf).await?;
        if n == 0 {
            return Ok(None);
        }
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
            if self.buf.last() == Some(&b'\r') {
                self.buf.pop();
            }
        }
        if self.buf.len() > self.max {
            return Err(LineTooLong(self.max).into());
        }
        let line = std::str::from_utf8(&self.buf).map_err(|_| LineError::NotUtf8)?;
        Ok(Some(line))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    async fn all(input: &[u8], max: usize) -> Result<Vec<String>, LineError> {
        let mut lines = BoundedLines::new(input, max);
        let mut out = Vec::new();
        while let Some(l) = lines.next_line().await? {
            out.push(l.to_owned());
        }
        Ok(out)
    }

    #[tokio::test]
    async fn lines_up_to_the_limit_pass_and_a_longer_one_is_refused() {
        assert_eq!(all(b"abcd\nxy\r\nz", 4).await.unwrap(), vec!["abcd", "xy", "z"]);
        assert_eq!(all(b"abcd\n", 4).await.unwrap(), vec!["abcd"]);
        assert!(matches!(all(b"ab\nabcde\n", 4).await, Err(LineError::TooLong(LineTooLong(4)))));
        assert!(matches!(all(&[b'a'; 100], 4).await, Err(LineError::TooLong(_))), "no line break at all");
        assert!(matches!(all(b"\xff\n", 4).await, Err(LineError::NotUtf8)));
        assert!(all(b"", 4).await.unwrap().is_empty());
    }
}
