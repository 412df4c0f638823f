//! A file's content type, by its extension as the original chose it: the
//! same for `/file/{cid}`, `/api/file/{cid}/info` and a WebDAV GET.

use std::path::Path;

/// The content type by extension, as the original chose it.
pub(crate) fn content_type(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("png") => "image/png",
        Some("webp") => "image/webp",
        Some("gif") => "image/gif",
        Some("mp4") => "video/mp4",
        Some("mkv") => "video/x-matroska",
        Some("avi") => "video/x-msvideo",
        Some("webm") => "video/webm",
        Some("mov") => "video/quicktime",
        Some("ts") => "video/mp2t",
        Some("m3u8") => "application/vnd.apple.mpegurl",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_follow_the_extension() {
        assert_eq!(content_type(Path::new("/f/a.MKV")), "video/x-matroska");
        assert_eq!(
            content_type(Path::new("/f/a.m3u8")),
            "application/vnd.apple.mpegurl"
        );
        assert_eq!(content_type(Path::new("/f/a.jpeg")), "image/jpeg");
        assert_eq!(
            content_type(Path::new("/f/noext")),
            "application/octet-stream"
        );
        assert_eq!(
            content_type(Path::new("/f/a.srt")),
            "application/octet-stream"
        );
    }
}
