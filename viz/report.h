#pragma once
// A run's output folder, runs/<example>/, with the pictures and an index.html that shows all of
// them with a line of explanation each.
#include <string>
#include <vector>

namespace mg::viz {

class Report {
 public:
  /// Create (or reuse) `dir`, e.g. "runs/hand_attention".
  Report(std::string dir, std::string title, std::string intro = "");
  /// Write `svg` to dir/file and list it in the index with `caption`.
  void add_svg(const std::string& file, const std::string& svg, const std::string& caption);
  /// Write any text file (a table, a DOT graph) to dir/file, listed with a link.
  void add_text(const std::string& file, const std::string& text, const std::string& caption);
  /// List an image already written into the folder (e.g. rendered by Graphviz).
  void add_image(const std::string& file, const std::string& caption);
  /// One picture of a grid: its file name, SVG text and caption.
  struct Figure {
    std::string file, svg, caption;
  };
  /// A grid of pictures, one row per inner vector (e.g. layers x heads), each with its own
  /// caption, and `caption` under the whole grid.
  void add_grid(const std::vector<std::vector<Figure>>& rows, const std::string& caption);
  /// A paragraph or a preformatted block (tables) in the index.
  void add_note(const std::string& text, bool preformatted = false);
  /// Write dir/index.html; returns its path. Called by the destructor too.
  std::string write_index();
  /// dir/file
  std::string path(const std::string& file) const;
  ~Report();

 private:
  struct Item {
    std::string kind, file, text;
    std::vector<std::vector<std::pair<std::string, std::string>>> grid;  // (file, caption) per cell
  };
  std::string dir_, title_, intro_;
  std::vector<Item> items_;
};

/// Write `text` to `path` (creating folders), replacing it atomically.
void write_file(const std::string& path, const std::string& text);

}  // namespace mg::viz
