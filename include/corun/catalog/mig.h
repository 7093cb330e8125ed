#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/catalog/device.h"
#include "corun/core/result.h"

namespace corun {

/// @brief One MIG GPU-instance profile ("3g.40gb"): its share of the GPU's compute slices
/// (each a seventh of the SMs on the GPUs corun knows) and memory slices (each an eighth of the
/// memory, L2 and DRAM bandwidth), from the catalog's mig.yaml.
struct MigProfile {
  std::string name;
  int compute = 0;        ///< compute slices held
  int memory = 0;         ///< memory slices held
  int max_instances = 0;  ///< most instances of this profile one GPU holds
  int compute_total = 7;  ///< compute slices of the whole GPU
  int memory_total = 8;   ///< memory slices of the whole GPU

  /// @brief Fraction of the GPU's SMs (and of its math peaks) the slice holds.
  [[nodiscard]] double sm_fraction() const {
    return static_cast<double>(compute) / compute_total;
  }
  /// @brief Fraction of the GPU's memory, L2 and DRAM bandwidth the slice holds.
  [[nodiscard]] double memory_fraction() const {
    return static_cast<double>(memory) / memory_total;
  }
};

/// @brief The MIG geometry of one device: its slice counts and supported profiles.
struct MigGpu {
  std::string device;  ///< catalog device key
  int compute_slices = 7;
  int memory_slices = 8;
  std::vector<MigProfile> profiles;  ///< in the catalog's order
  std::string source;

  /// @brief The profile called `name`, or nullptr.
  [[nodiscard]] const MigProfile* find(std::string_view name) const;
  /// @brief Every profile's name, for messages.
  [[nodiscard]] std::vector<std::string> profile_names() const;
  /// @brief Why `partition` cannot be created on this GPU (compute or memory slices exceed the
  /// GPU's, or a profile is repeated beyond its instance limit); empty when it can.
  [[nodiscard]] std::string invalid_reason(const std::vector<MigProfile>& partition) const;
};

/// @brief The MIG-capable devices of a catalog (catalog/mig.yaml; absent file = none).
/// Immutable after parsing; safe to share between threads.
class MigCatalog {
 public:
  /// @brief Parses mig.yaml text; errors name the file, field path and reason.
  static Result<MigCatalog> parse(std::string_view text, const std::string& file);
  /// @brief The MIG table of `catalog` (its mig.yaml; an empty table when it has none).
  static Result<MigCatalog> of(const Catalog& catalog);

  /// @brief The geometry of device `name`, or nullptr when it does not support MIG.
  [[nodiscard]] const MigGpu* find(std::string_view device) const;

 private:
  std::map<std::string, MigGpu, std::less<>> gpus_;
};

/// @brief The device a MIG slice behaves as: the GPU's SMs and math peaks scaled by the
/// slice's SM fraction, its VRAM, L2 and DRAM bandwidth by its memory fraction. Board power
/// (TDP, idle) is scaled by the SM fraction, so each slice is held to its share of the power
/// limit; the host CPU and PCIe link are the GPU's. Named "<gpu>/<profile>".
Device mig_slice_device(const Device& gpu, const MigProfile& profile);

}  // namespace corun
