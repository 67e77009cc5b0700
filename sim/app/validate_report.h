// The written side of `kvtier validate`: its report (report.json's
// content) as a Markdown section, and that section put into a document
// between markers, replacing an earlier one (docs/validation.md).
#pragma once

#include <string>

#include "models/param.h"

namespace kvtier {

// A number with `digits` significant digits.
std::string fmt(double v, int digits = 3);
// A fraction as a percentage: 0.0123 -> "1.23%", 0.25 -> "25.0%".
std::string pct(double frac);

// The Markdown section of one machine's validation report.
std::string validation_markdown(const json& report);

// Replaces the section between the kvtier validate markers in `doc` (or
// appends it), written atomically.
void write_doc_section(const std::string& doc, const std::string& section);

// `text` written atomically to `path`.
void write_text(const std::string& path, const std::string& text);

}  // namespace kvtier
