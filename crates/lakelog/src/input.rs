//! Opening log inputs: files or standard input, plain or gzip (recognised by its magic bytes).

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use flate2::bufread::MultiGzDecoder;

/// The first two bytes of every gzip member.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Wraps `reader` in a gzip decoder when its content starts with the gzip magic bytes. Concatenated
/// gzip members are read as one stream.
pub fn decompressing<R: BufRead + Send + 'static>(mut reader: R) -> io::Result<Box<dyn BufRead + Send>> {
    let gzip = reader.fill_buf()?.starts_with(&GZIP_MAGIC);
    Ok(if gzip {
        Box::new(BufReader::with_capacity(1 << 16, MultiGzDecoder::new(reader)))
    } else {
        Box::new(reader)
    })
}

/// Opens `path` (`-` is standard input) for reading lines, decompressing gzip.
pub fn open(path: &Path) -> io::Result<Box<dyn BufRead + Send>> {
    if path == Path::new("-") {
        decompressing(BufReader::with_capacity(1 << 16, io::stdin()))
    } else {
        decompressing(BufReader::with_capacity(1 << 16, File::open(path)?))
    }
}

/// The lineage URI of a local input: `file://` and its absolute path, or `stdin`.
pub fn object_uri(path: &Path) -> String {
    if path == Path::new("-") {
        return "stdin".to_owned();
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    format!("file://{}", absolute.display())
}

#[cfg(test)]
mod tests {
    use std::io::{Cursor, Write};

    use flate2::Compression;
    use flate2::write::GzEncoder;

    use super::*;

    fn read_all(mut reader: impl std::io::Read) -> io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        reader.read_to_end(&mut buf)?;
        Ok(buf)
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn plain_and_gzip_and_concatenated_members() {
        let plain = decompressing(Cursor::new(b"line 1\nline 2\n".to_vec())).unwrap();
        assert_eq!(read_all(plain).unwrap(), b"line 1\nline 2\n");
        let mut two = gzip(b"line 1\n");
        two.extend(gzip(b"line 2\n"));
        let gz = decompressing(Cursor::new(two)).unwrap();
        assert_eq!(read_all(gz).unwrap(), b"line 1\nline 2\n");
        assert_eq!(read_all(decompressing(Cursor::new(Vec::new())).unwrap()).unwrap(), b"");
    }

    #[test]
    fn corrupt_gzip_is_an_error() {
        let mut data = gzip(b"some log lines\n".repeat(100).as_slice());
        let mid = data.len() / 2;
        data[mid] ^= 0xff;
        assert!(read_all(decompressing(Cursor::new(data)).unwrap()).is_err());
    }
}
