#include "minigrad/viz/report.h"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "minigrad/tensor/atomic_file.h"
#include "minigrad/tensor/error.h"
#include "minigrad/viz/svg.h"

namespace mg::viz {

void write_file(const std::string& path, const std::string& text) { write_text_file(path, text, "viz"); }

Report::Report(std::string dir, std::string title, std::string intro)
    : dir_(std::move(dir)), title_(std::move(title)), intro_(std::move(intro)) {
  make_directories(dir_, "viz::Report");
}

std::string Report::path(const std::string& file) const { return dir_ + "/" + file; }

void Report::add_svg(const std::string& file, const std::string& svg, const std::string& caption) {
  write_file(path(file), svg);
  items_.push_back({"svg", file, caption});
}

void Report::add_text(const std::string& file, const std::string& text, const std::string& caption) {
  write_file(path(file), text);
  items_.push_back({"link", file, caption});
}

void Report::add_image(const std::string& file, const std::string& caption) {
  items_.push_back({"svg", file, caption});
}

void Report::add_grid(const std::vector<std::vector<Figure>>& rows, const std::string& caption) {
  Item it{"grid", "", caption, {}};
  for (const auto& row : rows) {
    it.grid.emplace_back();
    for (const Figure& f : row) {
      write_file(path(f.file), f.svg);
      it.grid.back().emplace_back(f.file, f.caption);
    }
  }
  items_.push_back(std::move(it));
}

void Report::add_note(const std::string& text, bool pre) { items_.push_back({pre ? "pre" : "p", "", text}); }

std::string Report::write_index() {
  std::string h = fmt::format(
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{0}</title>\n<style>body{{font-family:Helvetica,Arial,"
      "sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}} figure{{margin:1.5em 0}} img{{max-width:100%;height:auto}} figcaption{{color:#444;"
      "max-width:900px}} pre{{background:#f6f6f6;padding:.8em;overflow-x:auto}} .grid{{display:grid;gap:.5em;margin:1.5em 0}} .grid figure{{margin:0}} .grid figcaption{{font-size:90%}}</style></head><body>\n<h1>{0}</h1>\n",
      escape(title_));
  if (!intro_.empty()) h += "<p>" + escape(intro_) + "</p>\n";
  for (const Item& it : items_) {
    if (it.kind == "svg")
      h += fmt::format("<figure><img src=\"{0}\" alt=\"{1}\"><figcaption>{1}</figcaption></figure>\n", it.file,
                       escape(it.text));
    else if (it.kind == "grid") {
      size_t cols = 1;
      for (const auto& row : it.grid) cols = std::max(cols, row.size());
      h += fmt::format("<div class=\"grid\" style=\"grid-template-columns:repeat({},1fr)\">\n", cols);
      for (const auto& row : it.grid) {
        for (const auto& [file, cap] : row)
          h += fmt::format("<figure><img src=\"{0}\" alt=\"{1}\"><figcaption>{1}</figcaption></figure>\n", file,
                           escape(cap));
        for (size_t k = row.size(); k < cols; ++k) h += "<div></div>\n";
      }
      h += "</div>\n<p>" + escape(it.text) + "</p>\n";
    } else if (it.kind == "link")
      h += fmt::format("<p><a href=\"{}\">{}</a>: {}</p>\n", it.file, it.file, escape(it.text));
    else if (it.kind == "pre")
      h += "<pre>" + escape(it.text) + "</pre>\n";
    else
      h += "<p>" + escape(it.text) + "</p>\n";
  }
  h += "</body></html>\n";
  write_file(path("index.html"), h);
  return path("index.html");
}

Report::~Report() {
  try {
    write_index();
  } catch (...) {
    // a destructor must not throw; write_index() can be called explicitly to see the error
  }
}

}  // namespace mg::viz
