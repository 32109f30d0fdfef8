//! A small MessagePack reader for the commit, the one input of the hot path.
//!
//! msgspec encodes a commit as maps with named fields.  Reading them directly (instead
//! of through serde) matches keys as bytes, borrows every string from the input and
//! skips the fields rendering does not need without looking inside them; it made
//! decoding a 10k-item commit about three times faster than rmp-serde here.  Strings are
//! still checked to be UTF-8 (bytes from Python may be anything).

use super::input::{Block, Commit, ImageSource, Item, Role, State};

/// A cursor over MessagePack bytes.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

type R<T> = Result<T, String>;

impl<'a> Reader<'a> {
    /// Read from the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    fn err<T>(&self, what: &str) -> R<T> {
        Err(format!("commit (MessagePack): {what} at byte {}", self.pos))
    }

    #[inline(always)]
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        match self.buf.get(self.pos..self.pos + n) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => self.err("unexpected end of data"),
        }
    }

    #[inline(always)]
    fn byte(&mut self) -> R<u8> {
        Ok(self.take(1)?[0])
    }

    #[inline(always)]
    fn be(&mut self, n: usize) -> R<u64> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    #[inline(always)]
    fn peek(&self) -> R<u8> {
        match self.buf.get(self.pos) {
            Some(&b) => Ok(b),
            None => self.err("unexpected end of data"),
        }
    }

    #[inline(always)]
    /// The length of the map that starts here.
    pub fn map_len(&mut self) -> R<usize> {
        let m = self.byte()?;
        Ok(match m {
            0x80..=0x8f => usize::from(m & 0x0f),
            0xde => self.be(2)? as usize,
            0xdf => self.be(4)? as usize,
            _ => return self.err("expected a map"),
        })
    }

    #[inline(always)]
    /// The length of the array that starts here.
    pub fn array_len(&mut self) -> R<usize> {
        let m = self.byte()?;
        Ok(match m {
            0x90..=0x9f => usize::from(m & 0x0f),
            0xdc => self.be(2)? as usize,
            0xdd => self.be(4)? as usize,
            _ => return self.err("expected an array"),
        })
    }

    #[inline(always)]
    /// Raw bytes of the string that starts here (keys: compared, never decoded).
    pub fn raw_str(&mut self) -> R<&'a [u8]> {
        let m = self.byte()?;
        let n = match m {
            0xa0..=0xbf => usize::from(m & 0x1f),
            0xd9 => self.be(1)? as usize,
            0xda => self.be(2)? as usize,
            0xdb => self.be(4)? as usize,
            _ => return self.err("expected a string"),
        };
        self.take(n)
    }

    #[inline(always)]
    /// A UTF-8 string, borrowed from the input.
    pub fn str(&mut self) -> R<&'a str> {
        let raw = self.raw_str()?;
        if is_ascii(raw) {
            // Most texts are ASCII, and the word-at-a-time ASCII check is several
            // times cheaper than full UTF-8 validation on short strings.
            // SAFETY: ASCII bytes are valid UTF-8.
            return Ok(unsafe { std::str::from_utf8_unchecked(raw) });
        }
        std::str::from_utf8(raw).or_else(|_| self.err("string is not UTF-8"))
    }

    #[inline(always)]
    /// A string or nil.
    pub fn opt_str(&mut self) -> R<Option<&'a str>> {
        if self.peek()? == 0xc0 {
            self.pos += 1;
            return Ok(None);
        }
        self.str().map(Some)
    }

    /// A boolean.
    pub fn bool(&mut self) -> R<bool> {
        match self.byte()? {
            0xc2 => Ok(false),
            0xc3 => Ok(true),
            _ => self.err("expected a boolean"),
        }
    }

    #[inline(always)]
    /// A non-negative integer.
    pub fn uint(&mut self) -> R<u64> {
        let m = self.byte()?;
        match m {
            0x00..=0x7f => Ok(u64::from(m)),
            0xcc => self.be(1),
            0xcd => self.be(2),
            0xce => self.be(4),
            0xcf => self.be(8),
            // msgspec writes small signed ints in signed forms too; tokens are never < 0.
            0xd0..=0xd3 => {
                let v = self.be(1 << (m - 0xd0))?;
                Ok(v)
            }
            _ => self.err("expected an integer"),
        }
    }

    /// Skip one value of any kind.
    pub fn skip(&mut self) -> R<()> {
        let m = self.byte()?;
        let n: usize = match m {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => 0,
            0x80..=0x8f => return self.skip_n(2 * usize::from(m & 0x0f)),
            0x90..=0x9f => return self.skip_n(usize::from(m & 0x0f)),
            0xa0..=0xbf => usize::from(m & 0x1f),
            0xc4 | 0xd9 => self.be(1)? as usize,
            0xc5 | 0xda => self.be(2)? as usize,
            0xc6 | 0xdb => self.be(4)? as usize,
            0xc7 => self.be(1)? as usize + 1,
            0xc8 => self.be(2)? as usize + 1,
            0xc9 => self.be(4)? as usize + 1,
            0xca => 4,
            0xcb => 8,
            0xcc | 0xd0 => 1,
            0xcd | 0xd1 => 2,
            0xce | 0xd2 => 4,
            0xcf | 0xd3 => 8,
            0xd4 => 2,
            0xd5 => 3,
            0xd6 => 5,
            0xd7 => 9,
            0xd8 => 17,
            0xdc => {
                let n = self.be(2)? as usize;
                return self.skip_n(n);
            }
            0xdd => {
                let n = self.be(4)? as usize;
                return self.skip_n(n);
            }
            0xde => {
                let n = self.be(2)? as usize;
                return self.skip_n(2 * n);
            }
            0xdf => {
                let n = self.be(4)? as usize;
                return self.skip_n(2 * n);
            }
            0xc1 => return self.err("invalid marker 0xc1"),
        };
        self.take(n).map(|_| ())
    }

    fn skip_n(&mut self, n: usize) -> R<()> {
        for _ in 0..n {
            self.skip()?;
        }
        Ok(())
    }
}

/// Whether every byte is below 0x80.  The commit's ~70,000 strings are mostly short
/// (ids, names), where the fixed cost of a general check dominated: here a string of 8
/// bytes or more is covered by 8-byte words (the last one overlapping), shorter ones by
/// one OR over their bytes.
#[inline(always)]
fn is_ascii(s: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let n = s.len();
    let word = |i: usize| u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    if n < 8 {
        return s.iter().fold(0u8, |a, &b| a | b) < 0x80;
    }
    let mut acc = 0u64;
    let mut i = 0;
    while i + 32 <= n {
        acc |= word(i) | word(i + 8) | word(i + 16) | word(i + 24);
        i += 32;
    }
    while i + 8 <= n {
        acc |= word(i);
        i += 8;
    }
    acc |= word(n - 8);
    acc & HIGH == 0
}

fn role(r: &mut Reader<'_>) -> R<Role> {
    Ok(match r.raw_str()? {
        b"user" => Role::User,
        b"assistant" => Role::Assistant,
        b"tool" => Role::Tool,
        b"system" => Role::System,
        _ => return r.err("unknown role"),
    })
}

fn state(r: &mut Reader<'_>) -> R<State> {
    Ok(match r.raw_str()? {
        b"full" => State::Full,
        b"aged" => State::Aged,
        b"cleared" => State::Cleared,
        b"summarized" => State::Summarized,
        b"summary" => State::Summary,
        _ => return r.err("unknown state"),
    })
}

fn image_source<'a>(r: &mut Reader<'a>) -> R<ImageSource<'a>> {
    let mut s = ImageSource::default();
    for _ in 0..r.map_len()? {
        match r.raw_str()? {
            b"type" => s.kind = r.str()?,
            b"media_type" => s.media_type = r.str()?,
            b"data" => s.data = r.str()?,
            b"url" => s.url = r.str()?,
            _ => r.skip()?,
        }
    }
    Ok(s)
}

fn block<'a>(r: &mut Reader<'a>) -> R<Block<'a>> {
    let mut b = Block::default();
    for _ in 0..r.map_len()? {
        match r.raw_str()? {
            b"type" => b.kind = r.str()?,
            b"text" => b.text = r.str()?,
            b"thinking" => b.thinking = r.str()?,
            b"signature" => b.signature = r.str()?,
            b"vendor" => b.vendor = r.str()?,
            b"data" => b.data = r.str()?,
            b"source" => b.source = Some(image_source(r)?),
            // cache_control, tool ids/inputs, …: not read, on purpose (see input.rs).
            _ => r.skip()?,
        }
    }
    Ok(b)
}

fn item<'a>(r: &mut Reader<'a>) -> R<Item<'a>> {
    let mut it = Item::default();
    let mut has_id = false;
    let mut has_role = false;
    for _ in 0..r.map_len()? {
        match r.raw_str()? {
            b"source_node_id" => {
                it.source_node_id = r.str()?;
                has_id = true;
            }
            b"role" => {
                it.role = role(r)?;
                has_role = true;
            }
            b"state" => it.state = state(r)?,
            b"rendered" => it.rendered = r.str()?,
            b"tokens" => it.tokens = r.uint()?,
            b"name" => it.name = r.str()?,
            b"caller" => it.caller = r.opt_str()?,
            b"tool_use_id" => it.tool_use_id = r.opt_str()?,
            b"tool_input" => it.tool_input = r.str()?,
            b"is_error" => it.is_error = r.bool()?,
            b"blocks" => {
                let n = r.array_len()?;
                it.blocks.reserve_exact(n);
                for _ in 0..n {
                    it.blocks.push(block(r)?);
                }
            }
            _ => r.skip()?,
        }
    }
    if !has_id || !has_role {
        return r.err("an item without source_node_id or role");
    }
    Ok(it)
}

/// Decode a commit (as `msgspec.msgpack.encode(commit)` writes it).
pub fn commit(bytes: &[u8]) -> R<Commit<'_>> {
    let mut r = Reader::new(bytes);
    let mut c = Commit::default();
    for _ in 0..r.map_len()? {
        if r.raw_str()? == b"items" {
            let n = r.array_len()?;
            c.items.reserve_exact(n);
            for _ in 0..n {
                c.items.push(item(&mut r)?);
            }
        } else {
            r.skip()?;
        }
    }
    if r.pos != bytes.len() {
        return r.err("trailing bytes after the commit");
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::is_ascii;

    #[test]
    fn ascii_check_agrees_with_std_at_every_length_and_position() {
        // A wrong "ASCII" answer would let unvalidated bytes become a &str.
        for n in 0..100usize {
            let clean = vec![b'a'; n];
            assert!(is_ascii(&clean), "len {n}");
            for pos in 0..n {
                for high in [0x80u8, 0xc3, 0xff] {
                    let mut s = clean.clone();
                    s[pos] = high;
                    assert_eq!(is_ascii(&s), s.is_ascii(), "len {n} pos {pos}");
                    assert!(!is_ascii(&s));
                }
            }
        }
    }
}
