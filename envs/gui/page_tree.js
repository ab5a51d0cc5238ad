// The page as an agent reads it: one pass over the DOM that lists every rendered element
// with a role or a click handler, and every text, under ids that stay the same for the
// page's life (an element keeps its id while it exists; new elements get new ones).
// Called as page_tree(options); options = {ignore: [css selectors], maxNodes, maxName, maxText}.
(options) => {
  const state = window.__toolgym || (window.__toolgym = {ids: new WeakMap(), byId: new Map(), next: 1});
  const idOf = (node) => {
    let id = state.ids.get(node);
    if (id === undefined) {
      id = state.next++;
      state.ids.set(node, id);
    }
    state.byId.set(id, node);
    return id;
  };
  const ignored = new Set();
  for (const selector of options.ignore || []) {
    for (const el of document.querySelectorAll(selector)) ignored.add(el);
  }
  const maxName = options.maxName || 80;
  const clip = (text, most = maxName) => {
    const flat = (text || '').replace(/\s+/g, ' ').trim();
    return flat.length > most ? flat.slice(0, most - 1) + '…' : flat;
  };
  const INPUT_ROLES = {
    button: 'button', submit: 'button', reset: 'button', image: 'button', checkbox: 'checkbox',
    radio: 'radio', range: 'slider', number: 'spinbutton', hidden: null,
  };
  const TAG_ROLES = {
    BUTTON: 'button', SELECT: 'combobox', OPTION: 'option', TEXTAREA: 'textbox', IMG: 'img',
    H1: 'heading', H2: 'heading', H3: 'heading', H4: 'heading', H5: 'heading', H6: 'heading',
    UL: 'list', OL: 'list', LI: 'listitem', TABLE: 'table', TR: 'row', TD: 'cell',
    TH: 'columnheader', LABEL: 'label', CANVAS: 'canvas', SUMMARY: 'button', DIALOG: 'dialog', FORM: 'form',
    circle: 'graphics', rect: 'graphics', polygon: 'graphics', ellipse: 'graphics',
    path: 'graphics', line: 'graphics', text: 'graphics',
  };
  const roleOf = (el) => {
    const explicit = (el.getAttribute('role') || '').split(/\s+/)[0];
    if (explicit === 'presentation' || explicit === 'none') return null;
    if (explicit) return explicit;
    if (el.tagName === 'A') return el.hasAttribute('href') ? 'link' : null;
    if (el.tagName === 'SELECT' && (el.multiple || el.size > 1)) return 'listbox';
    if (el.tagName === 'INPUT') {
      const type = (el.getAttribute('type') || 'text').toLowerCase();
      return type in INPUT_ROLES ? INPUT_ROLES[type] : 'textbox';
    }
    return TAG_ROLES[el.tagName] || null;
  };
  // Roles whose name is their own text: their text is not listed again under them.
  const NAMED_BY_TEXT = new Set([
    'button', 'link', 'option', 'heading', 'label', 'cell', 'columnheader', 'listitem',
    'tab', 'menuitem', 'graphics',
  ]);
  const labelText = (el) => {
    if (el.id) {
      const label = document.querySelector('label[for="' + CSS.escape(el.id) + '"]');
      if (label) return label.textContent;
    }
    const wrapping = el.closest('label');
    return wrapping ? wrapping.textContent : '';
  };
  const nameOf = (el, role, click) => {
    const aria = el.getAttribute('aria-label');
    if (aria) return aria;
    const by = el.getAttribute('aria-labelledby');
    if (by) {
      const texts = by.split(/\s+/).map((id) => document.getElementById(id)).filter(Boolean);
      if (texts.length) return texts.map((t) => t.textContent).join(' ');
    }
    if (el.tagName === 'INPUT' && role === 'button') return el.value;
    if (['INPUT', 'TEXTAREA', 'SELECT'].includes(el.tagName)) {
      return labelText(el) || el.getAttribute('placeholder') || el.getAttribute('title') || '';
    }
    if (el.tagName === 'IMG') return el.getAttribute('alt') || el.getAttribute('title') || '';
    // An element with no role is named by its text only when it is what one clicks.
    if (role ? NAMED_BY_TEXT.has(role) : click) return el.textContent;
    return el.getAttribute('title') || '';
  };
  const clickable = (el, role, style) => {
    if (['button', 'link', 'checkbox', 'radio', 'option', 'tab', 'menuitem', 'textbox',
         'combobox', 'listbox', 'slider', 'spinbutton'].includes(role)) return true;
    if (el.onclick || el.__onclick || el.__onmousedown || el.__onmouseup) return true;
    if (window.jQuery && jQuery._data) {
      const events = jQuery._data(el, 'events');
      if (events && (events.click || events.mousedown || events.mouseup)) return true;
    }
    return style.cursor === 'pointer' && !(el.parentElement &&
      getComputedStyle(el.parentElement).cursor === 'pointer');
  };
  // Elements whose text children are not text on the page (a field's default value, code).
  const NO_TEXT = new Set(['TEXTAREA', 'SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'SELECT']);
  const width = window.innerWidth, height = window.innerHeight;
  // In view: inside the window, and what a click at its centre would reach (not scrolled
  // out of a box, clipped, or under another element).
  const inView = (rect, el) => {
    if (!(rect.width > 0 && rect.height > 0 && rect.bottom > 0 && rect.right > 0 &&
          rect.top < height && rect.left < width)) return false;
    const x = Math.min(Math.max(rect.left + rect.width / 2, 0), width - 1);
    const y = Math.min(Math.max(rect.top + rect.height / 2, 0), height - 1);
    const hit = document.elementFromPoint(x, y);
    return hit !== null && (hit === el || el.contains(hit) || (hit.tagName === 'LABEL' && hit.control === el));
  };
  const nodes = [];
  let truncated = false;
  const push = (node) => {
    if (nodes.length >= (options.maxNodes || 500)) { truncated = true; return false; }
    nodes.push(node);
    return true;
  };
  const walk = (el, depth, named, shown) => {
    if (ignored.has(el) || truncated) return;
    const style = getComputedStyle(el);
    // A closed drop-down's options are not rendered, but they are what it offers.
    if (!shown && el.checkVisibility && !el.checkVisibility({visibilityProperty: true})) return;
    if (!shown && (style.display === 'none' || style.visibility === 'hidden')) return;
    const role = roleOf(el);
    const click = clickable(el, role, style);
    const scrolls = el !== document.body && (
      (/(auto|scroll)/.test(style.overflowY) && el.scrollHeight > el.clientHeight) ||
      (/(auto|scroll)/.test(style.overflowX) && el.scrollWidth > el.clientWidth));
    let childDepth = depth, childNamed = named;
    if (role || click || scrolls) {
      const rect = (shown || el).getBoundingClientRect();
      const node = {
        id: idOf(el), depth, role: role || 'generic', name: clip(nameOf(el, role, click)),
        visible: shown ? inView(shown.getBoundingClientRect(), shown) : inView(rect, el),
        focused: document.activeElement === el, clickable: click,
        box: [Math.round(rect.left), Math.round(rect.top), Math.round(rect.width), Math.round(rect.height)],
      };
      if (el.tagName === 'TEXTAREA') node.multiline = true;
      if (el.tagName === 'SELECT' && el.multiple) node.multiselectable = true;
      if (role === 'textbox' || role === 'slider' || role === 'spinbutton') node.value = clip(el.value);
      if (role === 'combobox' && el.selectedIndex >= 0 && el.options[el.selectedIndex]) {
        node.value = clip(el.options[el.selectedIndex].text);
      }
      if (role === 'checkbox' || role === 'radio') node.checked = !!el.checked;
      if (role === 'option') node.selected = !!el.selected;
      if (el.disabled) node.disabled = true;
      if (scrolls) node.scrollable = true;
      if (!push(node)) return;
      childDepth = depth + 1;
      childNamed = named || ((role ? NAMED_BY_TEXT.has(role) : click) && node.name !== '');
    }
    const childShown = el.tagName === 'SELECT' ? el : shown;
    for (const child of el.childNodes) {
      if (child.nodeType === Node.ELEMENT_NODE) {
        walk(child, childDepth, childNamed, childShown);
      } else if (child.nodeType === Node.TEXT_NODE && !childNamed && !NO_TEXT.has(el.tagName)) {
        const text = clip(child.textContent, options.maxText || 400);
        if (!text) continue;
        const range = document.createRange();
        range.selectNodeContents(child);
        const rect = range.getBoundingClientRect();
        push({
          id: idOf(child), depth: childDepth, role: 'text', name: text,
          visible: inView(rect, el), focused: false,
          clickable: false,
          box: [Math.round(rect.left), Math.round(rect.top), Math.round(rect.width), Math.round(rect.height)],
        });
      }
    }
  };
  walk(document.body, 0, false, null);
  return {nodes, truncated, url: location.href, title: document.title,
          scroll: [Math.round(window.scrollX), Math.round(window.scrollY)], viewport: [width, height]};
}
