//! A small MessagePack reader for the commit, the one input of the hot paths.
//!
//! msgspec encodes a commit as maps with named fields.  Reading them directly (instead
//! of through serde) matches keys as bytes, borrows every string from the input and
//! skips the fields the core does not need without looking inside them; it made
//! decoding a 10k-item commit about three times faster than rmp-serde here.  Strings are
//! still checked to be UTF-8 (bytes from Python may be anything).
//!
//! The bytes may be hostile (`render` accepts raw bytes), so nothing here trusts them:
//! a declared length is checked against the bytes that remain before anything is
//! reserved or read, maps and arrays nest at most `MAX_DEPTH` levels, and skipping an
//! unknown value is a loop over an explicit, bounded stack, not a recursion.

use super::{Role, State, ITEM_LEVEL, MAX_DEPTH};

/// A cursor over MessagePack bytes; `base` is where `buf` starts in the caller's input
/// (for positions in error messages).
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

type R<T> = Result<T, String>;

impl<'a> Reader<'a> {
    /// Read from the start of `buf`, which starts at byte `base` of the whole input.
    pub fn new(buf: &'a [u8], base: usize) -> Self {
        Reader { buf, pos: 0, base }
    }

    fn err<T>(&self, what: &str) -> R<T> {
        Err(format!(
            "commit (MessagePack): {what} at byte {}",
            self.base + self.pos
        ))
    }

    #[inline(always)]
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[inline(always)]
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        if n > self.remaining() {
            return self.err("unexpected end of data");
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
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

    /// A declared element count, refused when even one byte per element (two for a
    /// map's key and value) would run past the end: so no count can make a caller
    /// reserve, or loop, beyond the size of the input.
    #[inline(always)]
    fn count(&mut self, n: u64, per: usize) -> R<usize> {
        match usize::try_from(n) {
            Ok(n) if n.saturating_mul(per) <= self.remaining() => Ok(n),
            _ => self.err("declared length exceeds the data"),
        }
    }

    #[inline(always)]
    /// The length of the map that starts here.
    pub fn map_len(&mut self) -> R<usize> {
        let m = self.byte()?;
        let n = match m {
            0x80..=0x8f => u64::from(m & 0x0f),
            0xde => self.be(2)?,
            0xdf => self.be(4)?,
            _ => return self.err("expected a map"),
        };
        self.count(n, 2)
    }

    #[inline(always)]
    /// The length of the array that starts here.
    pub fn array_len(&mut self) -> R<usize> {
        let m = self.byte()?;
        let n = match m {
            0x90..=0x9f => u64::from(m & 0x0f),
            0xdc => self.be(2)?,
            0xdd => self.be(4)?,
            _ => return self.err("expected an array"),
        };
        self.count(n, 1)
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

    /// A string, or `None` for nil or a value of any other kind (skipped, as a value
    /// inside a container at nesting level `level`): for a field whose name other
    /// blocks use for other things (a tool_result's `content` may be a list).
    pub fn str_or_skip(&mut self, level: usize) -> R<Option<&'a str>> {
        match self.peek()? {
            0xa0..=0xbf | 0xd9..=0xdb => self.str().map(Some),
            0xc0 => {
                self.pos += 1;
                Ok(None)
            }
            _ => self.skip(level).map(|()| None),
        }
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
    /// A non-negative integer (token counts).
    pub fn uint(&mut self) -> R<u64> {
        let m = self.byte()?;
        match m {
            0x00..=0x7f => Ok(u64::from(m)),
            0xcc => self.be(1),
            0xcd => self.be(2),
            0xce => self.be(4),
            0xcf => self.be(8),
            // Signed forms are accepted for values that are not negative.
            0xd0..=0xd3 => {
                let n = 1usize << (m - 0xd0);
                let v = self.be(n)?;
                let negative = v >> (8 * n - 1) & 1 == 1;
                if negative {
                    return self.err("negative integer");
                }
                Ok(v)
            }
            0xe0..=0xff => self.err("negative integer"),
            _ => self.err("expected an integer"),
        }
    }

    /// Skip one value of any kind found inside a container at nesting level `level`;
    /// containers within it may reach `MAX_DEPTH`.  Iterative: `open` holds, for each
    /// container opened inside the value, how many values its parent still had to
    /// skip, so memory is bounded by the depth and hostile nesting cannot grow the
    /// call stack.
    pub fn skip(&mut self, level: usize) -> R<()> {
        let mut open = Open::default();
        let mut left = 1usize; // values left in the innermost open container
        loop {
            while left == 0 {
                match open.pop() {
                    Some(n) => left = n,
                    None => return Ok(()),
                }
            }
            left -= 1;
            let m = self.byte()?;
            let container = match m {
                0x80..=0x8f => Some(self.count(u64::from(m & 0x0f), 2)? * 2),
                0x90..=0x9f => Some(self.count(u64::from(m & 0x0f), 1)?),
                0xdc => {
                    let n = self.be(2)?;
                    Some(self.count(n, 1)?)
                }
                0xdd => {
                    let n = self.be(4)?;
                    Some(self.count(n, 1)?)
                }
                0xde => {
                    let n = self.be(2)?;
                    Some(self.count(n, 2)? * 2)
                }
                0xdf => {
                    let n = self.be(4)?;
                    Some(self.count(n, 2)? * 2)
                }
                _ => None,
            };
            if let Some(n) = container {
                if level + open.depth() + 1 > MAX_DEPTH {
                    return self.err(&format!("nested deeper than {MAX_DEPTH} levels"));
                }
                open.push(left);
                left = n;
                continue;
            }
            let n: usize = match m {
                0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => 0,
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
                0xc1 => return self.err("invalid marker 0xc1"),
                // Containers were handled above.
                _ => return self.err("invalid marker"),
            };
            self.take(n)?;
        }
    }
}

/// The skip stack: a few levels inline (items nest two or three deep), more on the heap.
#[derive(Default)]
struct Open {
    inline: [usize; 8],
    spill: Vec<usize>,
    depth: usize,
}

impl Open {
    fn depth(&self) -> usize {
        self.depth
    }

    fn push(&mut self, n: usize) {
        match self.inline.get_mut(self.depth) {
            Some(slot) => *slot = n,
            None => self.spill.push(n),
        }
        self.depth += 1;
    }

    fn pop(&mut self) -> Option<usize> {
        self.depth = self.depth.checked_sub(1)?;
        match self.inline.get(self.depth) {
            Some(&n) => Some(n),
            None => self.spill.pop(),
        }
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

/// An item's fields as decoded, borrowing from the input (see `super::Item`).
#[derive(Debug, Default)]
pub struct RawItem<'a> {
    pub source_node_id: &'a str,
    pub role: Role,
    pub state: State,
    pub rendered: &'a str,
    pub tokens: u64,
    pub name: &'a str,
    pub caller: Option<&'a str>,
    pub tool_use_id: Option<&'a str>,
    pub tool_input: &'a str,
    pub is_error: bool,
    pub attached_from: Option<&'a str>,
    /// Why the item is as it is (`None`: the default, "new").
    pub reason: Option<&'a str>,
    /// The `blocks` array's position and bytes (read by `blocks`, block by block).
    pub blocks: (usize, &'a [u8]),
}

/// A content block's fields as decoded.
#[derive(Debug, Default)]
pub struct RawBlock<'a> {
    pub kind: &'a str,
    pub text: &'a str,
    pub source: Option<RawImage<'a>>,
    pub thinking: &'a str,
    pub signature: &'a str,
    pub vendor: &'a str,
    pub data: &'a str,
    /// A compaction block's summary (`None`: null or absent, a failed compaction).
    pub content: Option<&'a str>,
    pub encrypted_content: Option<&'a str>,
    /// JSON text of a compaction block's `tool_changes` (checked before it is used).
    pub tool_changes: Option<&'a str>,
    pub id: &'a str,
}

/// An image source's fields as decoded.
#[derive(Debug, Default)]
pub struct RawImage<'a> {
    pub kind: &'a str,
    pub media_type: &'a str,
    pub data: &'a str,
    pub url: &'a str,
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

/// Levels of an item's own maps, counted from the item map (level 1; `blocks` is at 2).
const ITEM: usize = 1;
const BLOCK: usize = 3;
const SOURCE: usize = 4;

fn image_source<'a>(r: &mut Reader<'a>) -> R<RawImage<'a>> {
    let mut s = RawImage::default();
    for _ in 0..r.map_len()? {
        match r.raw_str()? {
            b"type" => s.kind = r.str()?,
            b"media_type" => s.media_type = r.str()?,
            b"data" => s.data = r.str()?,
            b"url" => s.url = r.str()?,
            _ => r.skip(ITEM_LEVEL + SOURCE)?,
        }
    }
    Ok(s)
}

fn block<'a>(r: &mut Reader<'a>) -> R<RawBlock<'a>> {
    let mut b = RawBlock::default();
    for _ in 0..r.map_len()? {
        match r.raw_str()? {
            b"type" => b.kind = r.str()?,
            b"text" => b.text = r.str()?,
            b"thinking" => b.thinking = r.str()?,
            // A compaction block's signature may be null (none).
            b"signature" => b.signature = r.opt_str()?.unwrap_or_default(),
            b"vendor" => b.vendor = r.str()?,
            b"data" => b.data = r.str()?,
            b"source" => b.source = Some(image_source(r)?),
            // A compaction block's fields (used only when the block is one, whatever
            // order its keys come in); other blocks use some of these names for other
            // things (a tool_result's `content` may be a list), so only strings are
            // read and anything else is skipped.
            b"content" => b.content = r.str_or_skip(ITEM_LEVEL + BLOCK)?,
            b"encrypted_content" => b.encrypted_content = r.str_or_skip(ITEM_LEVEL + BLOCK)?,
            b"tool_changes" => b.tool_changes = r.str_or_skip(ITEM_LEVEL + BLOCK)?,
            b"id" => b.id = r.str_or_skip(ITEM_LEVEL + BLOCK)?.unwrap_or_default(),
            // cache_control, tool ids/inputs, …: not read, on purpose (see `super`).
            _ => r.skip(ITEM_LEVEL + BLOCK)?,
        }
    }
    Ok(b)
}

/// Decode the item map that starts at `r`'s position.
pub fn item<'a>(r: &mut Reader<'a>) -> R<RawItem<'a>> {
    let mut it = RawItem::default();
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
            b"attached_from" => it.attached_from = r.opt_str()?,
            b"reason" => it.reason = r.opt_str()?,
            b"blocks" => {
                let start = r.pos;
                r.skip(ITEM_LEVEL + ITEM)?;
                it.blocks = (r.base + start, &r.buf[start..r.pos]);
            }
            _ => r.skip(ITEM_LEVEL + ITEM)?,
        }
    }
    if !has_id || !has_role {
        return r.err("an item without source_node_id or role");
    }
    Ok(it)
}

/// Decode an item map that must span all of `r`'s bytes (an item's own slice).
pub fn whole_item<'a>(r: &mut Reader<'a>) -> R<RawItem<'a>> {
    let it = item(r)?;
    if r.remaining() != 0 {
        return r.err("trailing bytes after the item");
    }
    Ok(it)
}

/// Hand each block of an item's `blocks` (see `RawItem::blocks`) to `f`, one by one.
pub fn blocks<'a>(
    (base, bytes): (usize, &'a [u8]),
    mut f: impl FnMut(RawBlock<'a>) -> R<()>,
) -> R<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    let mut r = Reader::new(bytes, base);
    for _ in 0..r.array_len()? {
        f(block(&mut r)?)?;
    }
    Ok(())
}

/// Hand each item of an array of items to `f` with its position and bytes, one by one
/// (so a hostile count of tiny items fails at the first bad one instead of being
/// collected first).  Items are checked as if inside a commit (their array at level
/// `ITEM_LEVEL`), so an item has the same depth budget whether it came in a commit or in
/// a bare list.
fn each_item<'a>(r: &mut Reader<'a>, f: &mut impl FnMut(usize, &'a [u8]) -> R<()>) -> R<()> {
    for _ in 0..r.array_len()? {
        let start = r.pos;
        r.skip(ITEM_LEVEL)?;
        f(r.base + start, &r.buf[start..r.pos])?;
    }
    Ok(())
}

/// Hand the items of a commit (as `msgspec.msgpack.encode(commit)` writes it) to `f`,
/// each with its position and bytes.  Every other field is skipped, within the depth
/// bound.
pub fn commit_items<'a>(bytes: &'a [u8], mut f: impl FnMut(usize, &'a [u8]) -> R<()>) -> R<()> {
    let mut r = Reader::new(bytes, 0);
    for _ in 0..r.map_len()? {
        if r.raw_str()? == b"items" {
            each_item(&mut r, &mut f)?;
        } else {
            r.skip(1)?;
        }
    }
    if r.remaining() != 0 {
        return r.err("trailing bytes after the commit");
    }
    Ok(())
}

/// Decode the items of a bare item list (as `msgspec.msgpack.encode(commit.items)`
/// writes it) one by one, handing each to `f` (no slices are made: such items are not
/// looked up by their bytes).
pub fn array_items<'a>(bytes: &'a [u8], mut f: impl FnMut(RawItem<'a>) -> R<()>) -> R<()> {
    let mut r = Reader::new(bytes, 0);
    for _ in 0..r.array_len()? {
        f(item(&mut r)?)?;
    }
    if r.remaining() != 0 {
        return r.err("trailing bytes after the item list");
    }
    Ok(())
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
