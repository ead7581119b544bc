package objects

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// byExtension maps the file extensions of a digital-collections ingest to their MIME types, for
// files whose content says nothing [sniff] knows.
var byExtension = map[string]string{
	".tif": "image/tiff", ".tiff": "image/tiff", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png",
	".jp2": "image/jp2", ".gif": "image/gif", ".webp": "image/webp",
	".pdf": "application/pdf", ".zip": "application/zip",
	".mp4": "video/mp4", ".m4v": "video/x-m4v", ".mov": "video/quicktime", ".mkv": "video/x-matroska", ".webm": "video/webm",
	".mp3": "audio/mpeg", ".wav": "audio/x-wav", ".flac": "audio/flac", ".m4a": "audio/mp4", ".ogg": "audio/ogg",
	".vtt": "text/vtt", ".txt": "text/plain", ".csv": "text/csv",
}

// sniff returns the MIME type of content starting with head, or "" when it does not know it.
// Containers whose brand decides between audio and video (MP4, Matroska) are told apart by
// the file's extension.
func sniff(head []byte, ext string) string {
	has := func(at int, magic string) bool {
		return len(head) >= at+len(magic) && string(head[at:at+len(magic)]) == magic
	}
	switch {
	case has(0, "II*\x00"), has(0, "MM\x00*"):
		return "image/tiff"
	case has(0, "\xff\xd8\xff"):
		return "image/jpeg"
	case has(0, "\x89PNG\r\n\x1a\n"):
		return "image/png"
	case has(0, "GIF87a"), has(0, "GIF89a"):
		return "image/gif"
	case has(0, "\x00\x00\x00\x0cjP  \r\n"):
		return "image/jp2"
	case has(0, "RIFF") && has(8, "WEBP"):
		return "image/webp"
	case has(0, "RIFF") && has(8, "WAVE"):
		return "audio/x-wav"
	case has(0, "%PDF-"):
		return "application/pdf"
	case has(0, "PK\x03\x04"), has(0, "PK\x05\x06"):
		return "application/zip"
	case has(0, "fLaC"):
		return "audio/flac"
	case has(0, "ID3"), len(head) > 1 && head[0] == 0xff && head[1]&0xe0 == 0xe0 && ext == ".mp3":
		return "audio/mpeg"
	case has(0, "OggS"):
		return "audio/ogg"
	case has(4, "ftyp"):
		switch {
		case has(8, "M4A "):
			return "audio/mp4"
		case has(8, "M4V "):
			return "video/x-m4v"
		case has(8, "qt  "):
			return "video/quicktime"
		}
		if ext == ".m4a" {
			return "audio/mp4"
		}
		if ext == ".m4v" {
			return "video/x-m4v"
		}
		return "video/mp4"
	case has(0, "\x1a\x45\xdf\xa3"):
		if ext == ".webm" || bytes.Contains(head[:min(len(head), 64)], []byte("webm")) {
			return "video/webm"
		}
		return "video/x-matroska"
	case has(0, "WEBVTT"), has(0, "\xef\xbb\xbfWEBVTT"):
		return "text/vtt"
	}
	return ""
}

// DetectMIME returns a file's MIME type: from its first bytes, else from its extension, else
// application/octet-stream. It is Meadow's mime-type extraction (content first, the extension
// as the fallback).
func DetectMIME(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return detectMIME(f, path)
}

// detectMIME is [DetectMIME] of content read from r, named name.
func detectMIME(r io.Reader, name string) (string, error) {
	head := make([]byte, 64)
	n, err := io.ReadFull(r, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", err
	}
	if t := sniff(head[:n], strings.ToLower(filepath.Ext(name))); t != "" {
		return t, nil
	}
	return mimeByName(name), nil
}

// mimeByName returns the MIME type of a file's extension, else application/octet-stream.
func mimeByName(name string) string {
	if t, ok := byExtension[strings.ToLower(filepath.Ext(name))]; ok {
		return t
	}
	return "application/octet-stream"
}

// readsWebVTT reports whether r starts as a WebVTT file must ("WEBVTT", after a byte-order
// mark).
func readsWebVTT(r io.Reader) (bool, error) {
	head := make([]byte, 16)
	n, err := io.ReadFull(r, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return false, err
	}
	return sniff(head[:n], "") == "text/vtt", nil
}
