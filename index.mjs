import hyperagent from './index.js';

export const {
  Agent, HttpAgent, HttpsAgent, constants, request, Dispatcher, setGlobalDispatcher, getGlobalDispatcher,
} = hyperagent;
export default hyperagent;
