#!/usr/bin/env bash
# System packages the tests and the window need: an OpenSSH server (the SSH tests start a real
# one on loopback), Xvfb and the xcb libraries Qt's xcb platform plugin loads (screenshots of a
# real window), the libraries PySide6 links against, and Slurm with munge (the Slurm tests start
# a real munged + slurmctld + slurmd by hand, never through systemd), desktop-file-validate (the
# menu entry `install-desktop` writes is checked with it). Installed when run as root
# (CI is); otherwise this prints the exact command to run and fails.
set -euo pipefail
packages=(
  openssh-server openssh-client xvfb
  libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 libxcb-image0 libxcb-render-util0 libxcb-xkb1
  libxkbcommon-x11-0 libxcb-shape0 libxcb-randr0 libxcb-xinerama0
  libegl1 libgl1 libfontconfig1 libxkbcommon0 libdbus-1-3
  desktop-file-utils
  slurm-wlm slurmctld slurmd slurm-client munge
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "installing system packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  exit 0
fi
echo "TowerDeck's tests need these system packages, which are missing:" >&2
echo "    sudo apt-get install ${missing[*]}" >&2
echo "(run that, or run make as root, which installs them itself)" >&2
exit 1
