// 2-D convolution as im2col + GEMM. For one image and one group, im2col lays every window the
// kernel visits out as a column:
//
//   cols (K, Ho Wo),  K = Cg kH kW:   cols[(c, a, b), (i, j)] = x[c, i sh - pt + a dh, j sw - pl + b dw]
//
// (zero where that falls in the padding), and the convolution is one matrix product,
//
//   y_g (Og, Ho Wo) = W_g (Og, K) @ cols (K, Ho Wo)   [+ bias, written first: BLAS beta = 1].
//
// The backward is two more products through the same matrix: dcols = W_g^T dy_g, scattered back
// onto the image by col2im (the transpose of im2col: every window adds its column in), and
// dW_g = sum_n dy_g cols^T.
//
// Blocks: one image's product is small when the image is (8x8: Ho Wo = 64 columns), and BLAS is
// slow on small products. So images go in blocks of nb (chosen from the shapes alone, about 512
// columns per block): cols (K, nb Ho Wo) holds the windows of nb images side by side, and one
// product serves them all; y and dy are copied between (nb, Og, Ho Wo) and (Og, nb Ho Wo).
//
// Threads: blocks of images are independent, so the forward and dx split them across threads. dW
// sums over images; it is accumulated in fixed chunks of blocks, each into a buffer of its own, and
// the chunks are added in order: the bits do not depend on the thread count.
#include "tensor/ops/conv.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "tensor/blas.h"
#include "tensor/parallel.h"

namespace mg {
namespace {

constexpr int64_t kBlockColumns = 512;  // aim for this many columns (output pixels) per product
constexpr int64_t kImagesPerChunk = 4;  // dW's fixed chunks hold at least this many images

struct Geometry {
  int64_t N, C, H, W, O, Cg, Og, kh, kw, Ho, Wo, K, HoWo;
  int64_t nb;   // images per block (a function of the shapes only)
  bool direct;  // one image per block, 1x1 kernel, stride 1, no padding: cols is the image itself
};

Geometry check_conv(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dArgs& a, std::string_view op) {
  MG_CHECK(x.defined() && w.defined(), StateError, "{}: an operand is undefined", op);
  MG_CHECK(x.dim() == 4, ShapeError, "{}: expected input (N, C, H, W), got shape {}", op, shape_str(x.shape()));
  MG_CHECK(w.dim() == 4, ShapeError, "{}: expected weight (out_channels, in_channels / groups, kH, kW), got shape {}", op,
           shape_str(w.shape()));
  MG_CHECK(is_floating(x.dtype()) && x.dtype() == w.dtype() && (!bias.defined() || bias.dtype() == x.dtype()), DTypeError,
           "{}: input {}, weight {}{} must be one floating dtype", op, dtype_name(x.dtype()), dtype_name(w.dtype()),
           bias.defined() ? fmt::format(" and bias {}", dtype_name(bias.dtype())) : "");
  MG_CHECK(a.groups >= 1, ValueError, "{}: groups must be >= 1, got {}", op, a.groups);
  MG_CHECK(a.stride_h >= 1 && a.stride_w >= 1, ValueError, "{}: stride must be >= 1, got ({}, {})", op, a.stride_h, a.stride_w);
  MG_CHECK(a.dilation_h >= 1 && a.dilation_w >= 1, ValueError, "{}: dilation must be >= 1, got ({}, {})", op, a.dilation_h,
           a.dilation_w);
  MG_CHECK(a.pad_top >= 0 && a.pad_bottom >= 0 && a.pad_left >= 0 && a.pad_right >= 0, ValueError,
           "{}: padding must be >= 0, got top {}, bottom {}, left {}, right {}", op, a.pad_top, a.pad_bottom, a.pad_left,
           a.pad_right);
  Geometry g{};
  g.N = x.size(0), g.C = x.size(1), g.H = x.size(2), g.W = x.size(3);
  g.O = w.size(0), g.Cg = w.size(1), g.kh = w.size(2), g.kw = w.size(3);
  MG_CHECK(g.O % a.groups == 0, ValueError, "{}: out_channels {} is not divisible by groups {}", op, g.O, a.groups);
  MG_CHECK(g.C == checked_mul(g.Cg, a.groups, op), ShapeError,
           "{}: input has {} channels but weight {} with groups={} expects {}", op, g.C, shape_str(w.shape()), a.groups,
           g.Cg * a.groups);
  MG_CHECK(g.kh >= 1 && g.kw >= 1, ShapeError, "{}: the kernel size must be >= 1, got weight {}", op, shape_str(w.shape()));
  MG_CHECK(!bias.defined() || bias.shape() == Shape{g.O}, ShapeError, "{}: bias has shape {} but weight {} needs ({},)", op,
           shape_str(bias.shape()), shape_str(w.shape()), g.O);
  g.Og = g.O / a.groups;
  g.Ho = conv_output_size(g.H, g.kh, a.stride_h, a.pad_top, a.pad_bottom, a.dilation_h, op);
  g.Wo = conv_output_size(g.W, g.kw, a.stride_w, a.pad_left, a.pad_right, a.dilation_w, op);
  g.K = checked_mul(checked_mul(g.Cg, g.kh, op), g.kw, op);
  g.HoWo = checked_mul(g.Ho, g.Wo, op);
  checked_mul(g.K, g.HoWo, op);  // the im2col buffer's size
  g.nb = std::clamp<int64_t>(kBlockColumns / std::max<int64_t>(g.HoWo, 1), 1, std::max<int64_t>(g.N, 1));
  g.direct = g.nb == 1 && g.kh == 1 && g.kw == 1 && a.stride_h == 1 && a.stride_w == 1 && a.pad_top == 0 &&
             a.pad_bottom == 0 && a.pad_left == 0 && a.pad_right == 0;
  return g;
}

// Output columns j whose input column j sw - pl + q dw falls inside [0, W): [lo, hi).
inline std::pair<int64_t, int64_t> valid_columns(const Geometry& g, const Conv2dArgs& a, int64_t q) {
  const int64_t off = q * a.dilation_w - a.pad_left;  // input column of output column 0
  const int64_t lo = off >= 0 ? 0 : (-off + a.stride_w - 1) / a.stride_w;
  const int64_t hi = off >= g.W ? 0 : std::min(g.Wo, (g.W - 1 - off) / a.stride_w + 1);
  return {std::min(lo, g.Wo), std::max(hi, std::min(lo, g.Wo))};
}

// cols (K, Ho Wo) of image `img` (Cg, H, W), one group's channels; row r of cols starts at cols + r ld
template <class T>
void im2col(const T* img, const Geometry& g, const Conv2dArgs& a, T* cols, int64_t ld) {
  // Stride 1 with rows as wide as the input (e.g. 3x3, padding 1): a row of cols is the image
  // shifted by a constant, so the rows i of valid input are one contiguous copy; the columns that
  // fell into the padding are zeroed afterwards.
  const bool shifted = a.stride_h == 1 && a.stride_w == 1 && g.Wo == g.W;
  for (int64_t c = 0; c < g.Cg; ++c)
    for (int64_t p = 0; p < g.kh; ++p)
      for (int64_t q = 0; q < g.kw; ++q) {
        T* row = cols + ((c * g.kh + p) * g.kw + q) * ld;
        const auto [lo, hi] = valid_columns(g, a, q);
        const int64_t off = q * a.dilation_w - a.pad_left, dh = p * a.dilation_h - a.pad_top;  // h = i stride_h + dh
        if (shifted) {
          const int64_t ilo = std::clamp<int64_t>(-dh, 0, g.Ho), ihi = std::clamp<int64_t>(g.H - dh, ilo, g.Ho);
          for (int64_t j = 0; j < ilo * g.Wo; ++j) row[j] = T(0);
          for (int64_t j = ihi * g.Wo; j < g.HoWo; ++j) row[j] = T(0);
          if (ihi == ilo || hi == lo) {
            for (int64_t j = ilo * g.Wo; j < ihi * g.Wo; ++j) row[j] = T(0);
            continue;
          }
          // flat output index f = i Wo + j reads input (i + dh) W + j + off = f + dh W + off, for f in
          // [ilo Wo + lo, (ihi - 1) Wo + hi): every read is inside the image
          const int64_t f0 = ilo * g.Wo + lo, f1 = (ihi - 1) * g.Wo + hi;
          const T* from = img + (c * g.H + ilo + dh) * g.W + lo + off;  // the input of flat index f0 (lo + off >= 0)
          for (int64_t f = f0; f < f1; ++f) row[f] = from[f - f0];
          for (int64_t i = ilo; i < ihi; ++i) {
            for (int64_t j = 0; j < lo; ++j) row[i * g.Wo + j] = T(0);
            for (int64_t j = hi; j < g.Wo; ++j) row[i * g.Wo + j] = T(0);
          }
          continue;
        }
        for (int64_t i = 0; i < g.Ho; ++i) {
          T* out = row + i * g.Wo;
          const int64_t h = i * a.stride_h + dh;
          // Plain loops, not memcpy/memset: rows are short (8 columns for an 8x8 image).
          if (h < 0 || h >= g.H) {
            for (int64_t j = 0; j < g.Wo; ++j) out[j] = T(0);
            continue;
          }
          const T* in = img + (c * g.H + h) * g.W;  // in[j stride_w + off] is output column j's input
          for (int64_t j = 0; j < lo; ++j) out[j] = T(0);
          if (a.stride_w == 1)
            for (int64_t j = lo; j < hi; ++j) out[j] = in[j + off];
          else
            for (int64_t j = lo; j < hi; ++j) out[j] = in[j * a.stride_w + off];
          for (int64_t j = hi; j < g.Wo; ++j) out[j] = T(0);
        }
      }
}

// img (Cg, H, W) += the columns of dcols (K, Ho Wo) put back where im2col took them from; row r
// of dcols starts at dcols + r ld. dcols is scratch: the stride-1 path zeroes its padding columns.
template <class T>
void col2im(T* dcols, const Geometry& g, const Conv2dArgs& a, T* img, int64_t ld) {
  const bool shifted = a.stride_h == 1 && a.stride_w == 1 && g.Wo == g.W;  // as in im2col
  for (int64_t c = 0; c < g.Cg; ++c)
    for (int64_t p = 0; p < g.kh; ++p)
      for (int64_t q = 0; q < g.kw; ++q) {
        T* row = dcols + ((c * g.kh + p) * g.kw + q) * ld;
        const auto [lo, hi] = valid_columns(g, a, q);
        const int64_t off = q * a.dilation_w - a.pad_left, dh = p * a.dilation_h - a.pad_top;
        if (shifted) {
          // The inverse of im2col's contiguous copy: zero the entries that came from the padding,
          // then add the whole run of valid rows at once (a zero lands on a neighbour, adding nothing).
          const int64_t ilo = std::clamp<int64_t>(-dh, 0, g.Ho), ihi = std::clamp<int64_t>(g.H - dh, ilo, g.Ho);
          if (ihi == ilo || hi == lo) continue;
          for (int64_t i = ilo; i < ihi; ++i) {
            for (int64_t j = 0; j < lo; ++j) row[i * g.Wo + j] = T(0);
            for (int64_t j = hi; j < g.Wo; ++j) row[i * g.Wo + j] = T(0);
          }
          const int64_t f0 = ilo * g.Wo + lo, f1 = (ihi - 1) * g.Wo + hi;
          T* to = img + (c * g.H + ilo + dh) * g.W + lo + off;  // the pixel of flat index f0
          for (int64_t f = f0; f < f1; ++f) to[f - f0] += row[f];
          continue;
        }
        for (int64_t i = 0; i < g.Ho; ++i) {
          const int64_t h = i * a.stride_h + dh;
          if (h < 0 || h >= g.H) continue;
          T* dst = img + (c * g.H + h) * g.W;
          const T* src = row + i * g.Wo;
          if (a.stride_w == 1)
            for (int64_t j = lo; j < hi; ++j) dst[j + off] += src[j];
          else
            for (int64_t j = lo; j < hi; ++j) dst[j * a.stride_w + off] += src[j];
        }
      }
}

// cols (K, nb Ho Wo) of images n0 .. n0 + nb - 1 of x (N, C, H, W), group grp: image i's windows
// are columns [i Ho Wo, (i + 1) Ho Wo).
template <class T>
void im2col_block(const T* x, const Geometry& g, const Conv2dArgs& a, int64_t n0, int64_t nb, int64_t grp, T* cols) {
  for (int64_t i = 0; i < nb; ++i) im2col(x + ((n0 + i) * g.C + grp * g.Cg) * g.H * g.W, g, a, cols + i * g.HoWo, nb * g.HoWo);
}

}  // namespace

int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_before, int64_t pad_after, int64_t dilation,
                         std::string_view op) {
  const int64_t padded = checked_add(checked_add(in, pad_before, op), pad_after, op);
  const int64_t window = checked_add(checked_mul(dilation, kernel - 1, op), 1, op);
  MG_CHECK(padded >= window, ShapeError,
           "{}: the window ({} with dilation {}: {} wide) is larger than the padded input ({} + {} + {} = {})", op, kernel,
           dilation, window, in, pad_before, pad_after, padded);
  return (padded - window) / stride + 1;
}

// y[n, g Og + o, :] = W_g[o] @ cols(x[n], g) + bias        x (N, C, H, W)   W (O, Cg, kH, kW)   y (N, O, Ho, Wo)
Tensor conv2d(const Tensor& x0, const Tensor& w0, const Tensor& bias, const Conv2dArgs& a) {
  const Geometry g = check_conv(x0, w0, bias, a, "conv2d");
  const Tensor x = x0.contiguous(), w = w0.contiguous(), b = bias.defined() ? bias.contiguous() : Tensor();
  Tensor y = empty({g.N, g.O, g.Ho, g.Wo}, x.dtype());
  visit_float(x.dtype(), "conv2d", [&]<class T>() {
    const T *px = x.data<T>(), *pw = w.data<T>(), *pb = b.defined() ? b.data<T>() : nullptr;
    T* py = y.data<T>();
    const int64_t blocks = (g.N + g.nb - 1) / g.nb, work = std::max<int64_t>(1, g.nb * g.O * g.K * g.HoWo);
    parallel_for(0, blocks, grain_for(work), [&](int64_t b0, int64_t b1) {
      std::vector<T> cols(g.direct ? 0 : g.K * g.nb * g.HoWo), prod(g.nb == 1 ? 0 : g.Og * g.nb * g.HoWo);
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t n0 = blk * g.nb, nb = std::min(g.nb, g.N - n0), cols_n = nb * g.HoWo;
        for (int64_t grp = 0; grp < a.groups; ++grp) {
          const T* wg = pw + grp * g.Og * g.K;
          const bool gemm = g.K > 0 && g.Og > 0;
          if (gemm && !g.direct) im2col_block(px, g, a, n0, nb, grp, cols.data());
          const T* B = g.direct ? px + (n0 * g.C + grp * g.Cg) * g.H * g.W : cols.data();  // (K, nb Ho Wo)
          if (nb == 1) {  // one image: y_g = bias, then += W_g @ cols straight into y (BLAS beta = 1)
            T* out = py + (n0 * g.O + grp * g.Og) * g.HoWo;
            for (int64_t o = 0; o < g.Og; ++o) std::fill(out + o * g.HoWo, out + (o + 1) * g.HoWo, pb ? pb[grp * g.Og + o] : T(0));
            if (gemm) blas::gemm(false, false, g.Og, g.HoWo, g.K, T(1), wg, g.K, B, g.HoWo, T(1), out, g.HoWo);
            continue;
          }
          // prod (Og, nb Ho Wo) = W_g (Og, K) @ cols (K, nb Ho Wo); y[n0 + i, group] = prod[:, image i] + bias
          if (gemm) blas::gemm(false, false, g.Og, cols_n, g.K, T(1), wg, g.K, B, cols_n, T(0), prod.data(), cols_n);
          else std::fill(prod.begin(), prod.end(), T(0));
          for (int64_t i = 0; i < nb; ++i)
            for (int64_t o = 0; o < g.Og; ++o) {
              const T* src = prod.data() + o * cols_n + i * g.HoWo;
              T* dst = py + ((n0 + i) * g.O + grp * g.Og + o) * g.HoWo;
              const T bo = pb ? pb[grp * g.Og + o] : T(0);
              for (int64_t j = 0; j < g.HoWo; ++j) dst[j] = src[j] + bo;
            }
        }
      }
    });
  });
  return y;
}

// With a block of nb images side by side (dprod (Og, nb Ho Wo) gathered from dy, cols as in the forward):
// dcols_g = W_g^T (K, Og) @ dprod_g (Og, nb Ho Wo);  dx[n, group g] = col2im(dcols_g[:, image n])
// dW_g += dprod_g (Og, nb Ho Wo) @ cols_g^T (nb Ho Wo, K), summed over blocks in fixed chunks
// db[o] = sum_{n, i, j} dy[n, o, i, j]
Conv2dGrads conv2d_backward(const Tensor& dy0, const Tensor& x0, const Tensor& w0, const Conv2dArgs& a, bool need_dx,
                            bool need_dweight, bool need_dbias) {
  const Geometry g = check_conv(x0, w0, Tensor(), a, "conv2d_backward");
  MG_CHECK(dy0.defined(), StateError, "conv2d_backward: dy is undefined");
  MG_CHECK(dy0.shape() == (Shape{g.N, g.O, g.Ho, g.Wo}), ShapeError, "conv2d_backward: dy has shape {} but the output is {}",
           shape_str(dy0.shape()), shape_str(Shape{g.N, g.O, g.Ho, g.Wo}));
  MG_CHECK(dy0.dtype() == x0.dtype(), DTypeError, "conv2d_backward: dy is {} and x {}", dtype_name(dy0.dtype()),
           dtype_name(x0.dtype()));
  const Tensor dy = dy0.contiguous(), x = x0.contiguous(), w = w0.contiguous();
  Conv2dGrads out;
  visit_float(x.dtype(), "conv2d_backward", [&]<class T>() {
    const T *px = x.data<T>(), *pw = w.data<T>(), *pdy = dy.data<T>();
    const bool gemms = g.K > 0 && g.Og > 0;
    const int64_t blocks = (g.N + g.nb - 1) / g.nb, work = std::max<int64_t>(1, g.nb * g.O * g.K * g.HoWo);
    // dprod (Og, nb Ho Wo) of block n0 .. n0 + nb - 1, group grp: dy's rows side by side (dy itself for one image)
    auto gather_dy = [&](int64_t n0, int64_t nb, int64_t grp, std::vector<T>& buf) -> const T* {
      if (nb == 1) return pdy + (n0 * g.O + grp * g.Og) * g.HoWo;
      for (int64_t o = 0; o < g.Og; ++o)
        for (int64_t i = 0; i < nb; ++i)
          std::copy_n(pdy + ((n0 + i) * g.O + grp * g.Og + o) * g.HoWo, g.HoWo, buf.data() + o * nb * g.HoWo + i * g.HoWo);
      return buf.data();
    };
    if (need_dx) {
      out.dx = zeros({g.N, g.C, g.H, g.W}, x.dtype());
      T* pdx = out.dx.data<T>();
      if (gemms)
        parallel_for(0, blocks, grain_for(work), [&](int64_t b0, int64_t b1) {
          std::vector<T> dcols(g.direct ? 0 : g.K * g.nb * g.HoWo), dprod(g.nb == 1 ? 0 : g.Og * g.nb * g.HoWo);
          for (int64_t blk = b0; blk < b1; ++blk) {
            const int64_t n0 = blk * g.nb, nb = std::min(g.nb, g.N - n0), cols_n = nb * g.HoWo;
            for (int64_t grp = 0; grp < a.groups; ++grp) {
              T* img = pdx + (n0 * g.C + grp * g.Cg) * g.H * g.W;
              blas::gemm(true, false, g.K, cols_n, g.Og, T(1), pw + grp * g.Og * g.K, g.K, gather_dy(n0, nb, grp, dprod), cols_n,
                         T(0), g.direct ? img : dcols.data(), cols_n);
              if (!g.direct)
                for (int64_t i = 0; i < nb; ++i)
                  col2im(dcols.data() + i * g.HoWo, g, a, pdx + ((n0 + i) * g.C + grp * g.Cg) * g.H * g.W, cols_n);
            }
          }
        });
    }
    if (need_dweight) {
      out.dweight = zeros(w.shape(), x.dtype());
      const int64_t per_chunk = (kImagesPerChunk + g.nb - 1) / g.nb;  // blocks per chunk
      const int64_t chunks = (blocks + per_chunk - 1) / per_chunk, wsize = g.O * g.K;
      if (gemms && chunks > 0) {
        std::vector<T> partial(checked_mul(chunks, wsize, "conv2d_backward"), T(0));
        parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
          std::vector<T> cols(g.direct ? 0 : g.K * g.nb * g.HoWo), dprod(g.nb == 1 ? 0 : g.Og * g.nb * g.HoWo);
          for (int64_t c = c0; c < c1; ++c)
            for (int64_t blk = c * per_chunk; blk < std::min(blocks, (c + 1) * per_chunk); ++blk) {
              const int64_t n0 = blk * g.nb, nb = std::min(g.nb, g.N - n0), cols_n = nb * g.HoWo;
              for (int64_t grp = 0; grp < a.groups; ++grp) {
                if (!g.direct) im2col_block(px, g, a, n0, nb, grp, cols.data());
                const T* B = g.direct ? px + (n0 * g.C + grp * g.Cg) * g.H * g.W : cols.data();
                blas::gemm(false, true, g.Og, g.K, cols_n, T(1), gather_dy(n0, nb, grp, dprod), cols_n, B, cols_n, T(1),
                           partial.data() + c * wsize + grp * g.Og * g.K, g.K);
              }
            }
        });
        T* pdw = out.dweight.data<T>();
        for (int64_t c = 0; c < chunks; ++c)
          for (int64_t i = 0; i < wsize; ++i) pdw[i] += partial[c * wsize + i];
      }
    }
    if (need_dbias) {
      out.dbias = empty({g.O}, x.dtype());
      T* pdb = out.dbias.data<T>();
      parallel_for(0, g.O, grain_for(g.N * g.HoWo), [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) {
          double s = 0;
          for (int64_t n = 0; n < g.N; ++n)
            for (int64_t i = 0; i < g.HoWo; ++i) s += pdy[(n * g.O + o) * g.HoWo + i];
          pdb[o] = static_cast<T>(s);
        }
      });
    }
  });
  return out;
}

}  // namespace mg
