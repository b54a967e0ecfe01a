() => {
  /* The workbench app's own script (workbench.ui.JS, run once on load). Each figure is an image
     to a screen reader, named by its title (which says the request, method and cycle): read as a
     page, a plotly figure was a stream of SVG text fragments. Kept current as the panels redraw. */
  const name = () => {
    for (const plot of document.querySelectorAll(".js-plotly-plot")) {
      const title = plot.querySelector(".gtitle");
      const lines = title ? [...title.querySelectorAll(".line")].map(l => l.textContent.trim()) : [];
      const label = lines.length ? lines.filter(Boolean).join("; ")       // a title's lines, apart
                    : title ? title.textContent.trim() : "figure";
      if (plot.getAttribute("aria-label") !== label) {
        plot.setAttribute("role", "img");
        plot.setAttribute("aria-label", label);
      }
    }
  };
  new MutationObserver(name).observe(document.body, { subtree: true, childList: true });
  name();
  /* An accordion's header says whether it is open (gradio marks it with a class alone, so a
     screen reader heard a button and nothing of what it hides). */
  const expanded = () => {
    for (const b of document.querySelectorAll(".gr-accordion > button.label-wrap")) {
      const open = String(b.classList.contains("open"));
      if (b.getAttribute("aria-expanded") !== open) b.setAttribute("aria-expanded", open);
    }
  };
  new MutationObserver(records => {
    if (records.some(r => r.target.classList && r.target.classList.contains("label-wrap"))) expanded();
  }).observe(document.body, { subtree: true, attributes: true, attributeFilter: ["class"] });
  new MutationObserver(expanded).observe(document.body, { subtree: true, childList: true });
  expanded();
  /* The arrow keys step the cycles, as Prev and Next do, wherever focus is not in a field that
     has its own use for them (the slider, the menus, the prompt, the numbers) or in a box that
     scrolls sideways (the neighbour table); a presenter's clicker (PageDown / PageUp) steps once
     focus is in the bar of buttons (press Next once), and elsewhere pages the page down as ever.
     A teacher at the front of a room has no mouse. A held key steps once (its repeats would
     queue a step per repeat). */
  const STEP_KEYS = { ArrowRight: "#wb-next", ArrowLeft: "#wb-prev", PageDown: "#wb-next", PageUp: "#wb-prev" };
  const OWN_KEYS = "input, textarea, select, [contenteditable=''], [contenteditable='true'], [role=listbox], " +
                   "[role=slider], [role=combobox]";
  const scrollsSideways = el => {
    for (; el && el !== document.body; el = el.parentElement) {
      const o = getComputedStyle(el).overflowX;
      if ((o === "auto" || o === "scroll") && el.scrollWidth > el.clientWidth) return true;
    }
    return false;
  };
  document.addEventListener("keydown", e => {
    const target = STEP_KEYS[e.key];
    if (!target || e.defaultPrevented || e.repeat || e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
    const at = e.target instanceof Element ? e.target : null;
    if (at && at.closest(OWN_KEYS)) return;
    if (e.key.startsWith("Page") ? !(at && at.closest("#wb-controls")) : scrollsSideways(at)) return;
    const button = document.querySelector(target);
    if (!button || button.disabled) return;
    e.preventDefault();         // (the page would scroll too)
    button.click();
  });
  /* The title's "how to read this screen" link opens the note it jumps to (an anchor alone
     scrolled to a closed accordion's header). */
  document.addEventListener("click", e => {
    const link = e.target.closest && e.target.closest('a[href="#wb-reading"]');
    const head = link && document.querySelector("#wb-reading > button.label-wrap");
    if (!head) return;
    e.preventDefault();
    if (!head.classList.contains("open")) head.click();
    const bar = document.querySelector("#wb-controls");      // sticky: the header goes just under it
    setTimeout(() => {      // once the note is drawn (before, the page may end too soon to scroll there)
      window.scrollBy(0, head.getBoundingClientRect().top - ((bar && bar.offsetHeight) || 0) - 8);
    }, 150);
  });
}
