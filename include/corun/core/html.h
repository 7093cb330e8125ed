#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace corun {

/// @brief A complete, self-contained HTML document: `body` inside the page shell every corun
/// page shares (one inline style sheet; no scripts, no external files, no web fonts), so that
/// a page opens anywhere, offline, and renders the same in a headless browser.
/// @param title the document title (escaped here)
/// @param body HTML markup, inserted as is
/// Thread-safety: pure function.
std::string html_document(std::string_view title, std::string_view body);

/// @brief A table: a header row and body rows of plain text (escaped here). A row shorter than
/// the header is padded with empty cells.
/// @param numeric_columns per column, whether it is right-aligned (numbers); missing = left
/// Thread-safety: pure function.
std::string html_table(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows,
                       const std::vector<bool>& numeric_columns = {});

/// @brief An SVG document made fit to sit inside HTML: any XML prolog or doctype removed.
/// Thread-safety: pure function.
std::string inline_svg(std::string_view svg);

/// @brief The Markdown that corun's results documents are written in, as HTML: ATX headings,
/// paragraphs, `*`/`-` and numbered lists, pipe tables with an alignment row, fenced code,
/// HTML comments, and inline code, bold and links. An image `![alt](target)` whose target is
/// a key of `inline_images` becomes that SVG, inline; any other image shows its alt text, and
/// a link shows its text only, so that the page never refers to another file.
/// @param inline_images image target (as written in the Markdown) -> SVG document
/// @code
///   const std::string body = markdown_to_html(md, {{"scheduler-oracle.svg", svg}});
///   write_file_atomic(path, html_document("Online scheduler evaluation", body));
/// @endcode
/// Thread-safety: pure function.
std::string markdown_to_html(std::string_view markdown,
                             const std::map<std::string, std::string>& inline_images = {});

}  // namespace corun
