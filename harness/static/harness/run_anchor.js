// A link to a part of a run's page (a call: #call-<id>, from replay and what-if) may point
// into a folded step: unfold what holds it, then bring it into view.
(function () {
  function reveal() {
    if (!location.hash) return;
    const target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (!target) return;
    for (let node = target.parentElement; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
    target.classList.add("anchor-target");
    target.scrollIntoView({block: "center"});
  }
  window.addEventListener("hashchange", reveal);
  document.addEventListener("DOMContentLoaded", reveal);
})();
