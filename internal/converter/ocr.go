package converter

import (
	"context"
	"strings"

	"github.com/sluice-project/sluice/internal/action"
)

// tesseractLangs maps ISO-639-1 codes to tesseract's language codes for the common languages.
var tesseractLangs = map[string]string{
	"af": "afr", "ar": "ara", "bg": "bul", "bn": "ben", "ca": "cat", "cs": "ces", "cy": "cym",
	"da": "dan", "de": "deu", "el": "ell", "en": "eng", "es": "spa", "et": "est", "eu": "eus",
	"fa": "fas", "fi": "fin", "fr": "fra", "ga": "gle", "gl": "glg", "he": "heb", "hi": "hin",
	"hr": "hrv", "hu": "hun", "id": "ind", "is": "isl", "it": "ita", "ja": "jpn", "ko": "kor",
	"lt": "lit", "lv": "lav", "mk": "mkd", "ms": "msa", "mt": "mlt", "nb": "nor", "nl": "nld",
	"nn": "nor", "no": "nor", "pl": "pol", "pt": "por", "ro": "ron", "ru": "rus", "sk": "slk",
	"sl": "slv", "sq": "sqi", "sr": "srp", "sv": "swe", "sw": "swa", "ta": "tam", "th": "tha",
	"tl": "tgl", "tr": "tur", "uk": "ukr", "ur": "urd", "vi": "vie", "zh": "chi_sim",
}

// TesseractLang returns tesseract's code for an ISO-639-1 language ("fr" → "fra"). Empty means
// English; a code tesseract already knows ("deu", "chi_tra", "eng+fra") passes through.
func TesseractLang(lang string) string {
	lang = strings.ToLower(strings.TrimSpace(lang))
	if lang == "" {
		return "eng"
	}
	if i := strings.IndexAny(lang, "-_"); i == 2 { // "pt-BR", "zh_TW"
		if lang[:2] == "zh" && (strings.HasSuffix(lang, "tw") || strings.HasSuffix(lang, "hk") || strings.HasSuffix(lang, "hant")) {
			return "chi_tra"
		}
		lang = lang[:2]
	}
	if t, ok := tesseractLangs[lang]; ok {
		return t
	}
	return lang
}

// OCR runs tesseract on an image file and returns its text (not yet sanitised). lang is a
// tesseract code from [TesseractLang]. A missing language pack is a permanent error naming the
// package to install.
func (r *Runner) OCR(ctx context.Context, imagePath, lang string) (string, error) {
	out, err := r.Output(ctx, "tesseract", 64<<20, imagePath, "-", "-l", lang, "--psm", "3")
	if err != nil {
		if s := exitStderr(err); strings.Contains(s, "Failed loading language") || strings.Contains(s, "couldn't load any languages") {
			var pkgs []string
			for _, l := range strings.Split(lang, "+") {
				pkgs = append(pkgs, "tesseract-ocr-"+strings.ReplaceAll(strings.ToLower(l), "_", "-"))
			}
			return "", action.Permanentf("ocr language %q is not installed: apt-get install %s", lang, strings.Join(pkgs, " "))
		}
		return "", Failure("ocr", err)
	}
	return string(out), nil
}
